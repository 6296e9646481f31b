//! PCI addresses (`[domain:]bus:device.function`) as a typed value: parsed once from the
//! inventory, so that no other text reaches a template or the agent's EAL arguments.

use std::fmt;

use serde::Serialize;

/// A PCI function address. The domain is optional as written (`xbflash2 -d 3b:00.0`); sysfs paths
/// and EAL arguments take [`Bdf::full`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bdf {
    /// PCI domain (segment), when given.
    pub domain: Option<u16>,
    /// Bus, 0x00–0xff.
    pub bus: u8,
    /// Device, 0x00–0x1f.
    pub device: u8,
    /// Function, 0–7.
    pub function: u8,
}

/// Why a text is not a PCI address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BdfError {
    /// Not of the form asked for.
    #[error("`{text}` is not a PCI address ({form})")]
    Form {
        /// The text.
        text: String,
        /// The form expected (`DDDD:BB:DD.F` or `[DDDD:]BB:DD.F`).
        form: &'static str,
    },
    /// A device number above 0x1f.
    #[error("`{text}`: device 0x{device:02x} is out of range (00..=1f)")]
    Device {
        /// The text.
        text: String,
        /// The device number.
        device: u16,
    },
    /// A function number above 7.
    #[error("`{text}`: function {function} is out of range (0..=7)")]
    Function {
        /// The text.
        text: String,
        /// The function number.
        function: u16,
    },
}

impl Bdf {
    /// Parse `DDDD:BB:DD.F` or, when `domain_optional`, `BB:DD.F` (hexadecimal digits; a
    /// four-digit domain, two-digit bus and device, one-digit function).
    pub fn parse(s: &str, domain_optional: bool) -> Result<Bdf, BdfError> {
        let form = if domain_optional { "[DDDD:]BB:DD.F" } else { "DDDD:BB:DD.F" };
        let bad = || BdfError::Form { text: s.to_string(), form };
        let hex = |t: &str, len: usize| -> Option<u16> {
            (t.len() == len && t.bytes().all(|b| b.is_ascii_hexdigit())).then(|| u16::from_str_radix(t, 16).ok())?
        };
        let (domain, rest) = match s.split_once(':') {
            Some((d, rest)) if rest.contains(':') => (Some(hex(d, 4).ok_or_else(bad)?), rest),
            _ if domain_optional => (None, s),
            _ => return Err(bad()),
        };
        let (bus, rest) = rest.split_once(':').ok_or_else(bad)?;
        let (device, function) = rest.split_once('.').ok_or_else(bad)?;
        let (bus, device, function) =
            (hex(bus, 2).ok_or_else(bad)?, hex(device, 2).ok_or_else(bad)?, hex(function, 1).ok_or_else(bad)?);
        if device > 0x1f {
            return Err(BdfError::Device { text: s.to_string(), device });
        }
        if function > 7 {
            return Err(BdfError::Function { text: s.to_string(), function });
        }
        // In range by construction: two hexadecimal digits, or checked above.
        let byte = |v: u16| u8::try_from(v).unwrap_or(u8::MAX);
        Ok(Bdf { domain, bus: byte(bus), device: byte(device), function: byte(function) })
    }

    /// `DDDD:BB:DD.F`, domain 0000 when none was given: the name under `/sys/bus/pci/devices/`.
    pub fn full(&self) -> String {
        Bdf { domain: Some(self.domain.unwrap_or(0)), ..*self }.to_string()
    }
}

/// As written, in lowercase: `0000:3b:00.0`, or `3b:00.0` without a domain.
impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(d) = self.domain {
            write!(f, "{d:04x}:")?;
        }
        write!(f, "{:02x}:{:02x}.{:x}", self.bus, self.device, self.function)
    }
}

impl Serialize for Bdf {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_and_short_forms() {
        let b = Bdf::parse("0000:3B:00.1", false).unwrap();
        assert_eq!(b, Bdf { domain: Some(0), bus: 0x3b, device: 0, function: 1 });
        assert_eq!(b.to_string(), "0000:3b:00.1");
        let short = Bdf::parse("3b:1f.7", true).unwrap();
        assert_eq!((short.to_string(), short.full()), ("3b:1f.7".to_string(), "0000:3b:1f.7".to_string()));
    }

    #[test]
    fn malformed_and_out_of_range_addresses() {
        for bad in
            ["", "3b:00.0", "0000:3b:00", "000:3b:00.0", "0000:3b:00.0; reboot", "0000:3b:00.0 ", "x0000:3b:00.0"]
        {
            assert_eq!(
                Bdf::parse(bad, false).unwrap_err().to_string(),
                format!("`{bad}` is not a PCI address (DDDD:BB:DD.F)")
            );
        }
        for bad in ["3b:00.0 && reboot", "3b:0.0", "-3b:00.0", "3b:00.0\n"] {
            assert_eq!(
                Bdf::parse(bad, true).unwrap_err().to_string(),
                format!("`{bad}` is not a PCI address ([DDDD:]BB:DD.F)")
            );
        }
        assert_eq!(
            Bdf::parse("0000:3b:20.0", false).unwrap_err().to_string(),
            "`0000:3b:20.0`: device 0x20 is out of range (00..=1f)"
        );
        assert_eq!(
            Bdf::parse("3b:00.8", true).unwrap_err().to_string(),
            "`3b:00.8`: function 8 is out of range (0..=7)"
        );
    }
}
