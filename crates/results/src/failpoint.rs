//! Fault injection for the end-to-end tests, compiled in only with the `failpoints` feature.
//!
//! `ORCHESTRATE_FAILPOINTS=name[=count],…` arms the named points: each fires `count` times (every
//! time without a count). Points: `corrupt-upload` (one byte of an upload is flipped on its way to
//! the host); `history-add-killed` (`history add` aborts between a study's estimates and its rows).

/// Whether the point `name` fires now.
#[cfg(feature = "failpoints")]
pub fn hit(name: &str) -> bool {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static ARMED: OnceLock<Mutex<HashMap<String, Option<u64>>>> = OnceLock::new();
    let armed = ARMED.get_or_init(|| {
        let spec = std::env::var("ORCHESTRATE_FAILPOINTS").unwrap_or_default();
        let points = spec
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| match s.split_once('=') {
                Some((n, c)) => (n.to_string(), c.parse().ok()),
                None => (s.to_string(), None),
            })
            .collect();
        Mutex::new(points)
    });
    let mut armed = armed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    match armed.get_mut(name) {
        Some(None) => true,
        Some(Some(0)) | None => false,
        Some(Some(n)) => {
            *n -= 1;
            true
        }
    }
}

/// Whether the point `name` fires now: never in this build.
#[cfg(not(feature = "failpoints"))]
#[inline]
pub fn hit(_name: &str) -> bool {
    false
}
