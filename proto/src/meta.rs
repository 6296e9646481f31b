//! Key-value metadata keys of a run file: what a stored run says about itself (study, program,
//! session, run, the TSC rate its stamps convert with, ...). Every key starts with
//! [`META_PREFIX`]; the constants are the full keys, as stored.

/// Prefix of every metadata key the tool writes.
pub const META_PREFIX: &str = "latency.";

/// Defines one constant per key, each the prefix followed by the key's name, and [`ALL`].
macro_rules! keys {
    ($($(#[$doc:meta])* $name:ident = $key:literal;)*) => {
        $(
            $(#[$doc])*
            pub const $name: &str = concat!("latency.", $key);
        )*
        /// Every key.
        pub const ALL: &[&str] = &[$($name),*];
    };
}

keys! {
    /// Study name of the plan.
    STUDY = "study";
    /// Hash of the plan the run belongs to.
    PLAN_HASH = "plan_hash";
    /// P4 program measured.
    PROGRAM = "program";
    /// Kind of session: the program's bitstream or the null (bypass) bitstream.
    KIND = "kind";
    /// Session number.
    SESSION = "session";
    /// Run number within the session.
    RUN = "run";
    /// Attempt number of the run (retries count up from 1).
    ATTEMPT = "attempt";
    /// Name of the bitstream loaded.
    BITSTREAM = "bitstream";
    /// SHA-256 of the bitstream image (empty when unknown).
    BITSTREAM_SHA256 = "bitstream_sha256";
    /// Trace replayed.
    TRACE = "trace";
    /// Number of probes in the trace.
    PROBES = "probes";
    /// Testbed that produced the run.
    TESTBED = "testbed";
    /// Seed of the study.
    SEED = "seed";
    /// TSC rate (ticks per second) that converts the run's stamps to ns.
    TSC_HZ = "tsc_hz";
    /// Version of the tool that wrote the file.
    TOOL_VERSION = "tool_version";
    /// Studies with factors: the run's level (`pacing_pps=500/frame_size=128`).
    LEVEL = "level";
    /// Imported runs: the source file, relative to the imported folder.
    SOURCE = "source";
    /// Imported runs: SHA-256 of the source file.
    SOURCE_SHA256 = "source_sha256";
    /// Arrow schema metadata: version of the record schema (value
    /// [`crate::schema::SCHEMA_VERSION`]).
    SCHEMA_VERSION = "schema_version";
}

/// The name of `key` without [`META_PREFIX`] (`latency.tsc_hz` → `tsc_hz`), if it has the prefix.
pub fn short_name(key: &str) -> Option<&str> {
    key.strip_prefix(META_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_carry_the_prefix_and_are_distinct() {
        let mut names: Vec<&str> = ALL.iter().map(|k| short_name(k).expect("prefixed")).collect();
        assert!(names.iter().all(|n| !n.is_empty() && !n.contains('.')));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
        assert_eq!(TSC_HZ, "latency.tsc_hz");
        assert_eq!(BITSTREAM_SHA256, "latency.bitstream_sha256");
        assert_eq!(short_name("other.key"), None);
    }
}
