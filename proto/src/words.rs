//! Enums spelled as words: one table per enum gives each variant its one name, used by plans
//! (serde), the journal and summaries (serde), text ([`Display`](core::fmt::Display)), decoders
//! (`WORDS`), messages (`NAMES`) and command lines (`clap`, through [`value_enum!`](crate::value_enum!)).
//!
//! ```
//! latency_proto::words! {
//!     /// A colour.
//!     #[derive(Clone, Copy, Debug, PartialEq, Eq)]
//!     pub enum Colour {
//!         /// Red.
//!         Red = "red",
//!         /// Light blue.
//!         LightBlue = "light_blue",
//!     }
//! }
//! assert_eq!(Colour::LightBlue.name(), "light_blue");
//! assert_eq!(Colour::from_name("red"), Some(Colour::Red));
//! assert_eq!(Colour::ALL, [Colour::Red, Colour::LightBlue]);
//! assert_eq!(Colour::NAMES, ["red", "light_blue"]);
//! assert_eq!(serde_json::to_string(&Colour::LightBlue).unwrap(), "\"light_blue\"");
//! let err = serde_json::from_str::<Colour>("\"blue\"").unwrap_err().to_string();
//! assert!(err.contains("unknown variant `blue`, expected `red` or `light_blue`"), "{err}");
//! ```

#[doc(hidden)]
pub use serde as __serde;

#[cfg(feature = "clap")]
#[doc(hidden)]
pub use clap as __clap;

/// Declares an enum of unit variants, each with its name (`Variant = "name"`), and gives it `ALL`,
/// `WORDS` (name, value), `NAMES`, `name`, `from_name`, `Display`, `Serialize` and `Deserialize`
/// from that one table. Derives and documentation are written on the enum as usual.
#[macro_export]
macro_rules! words {
    (
        $(#[$meta:meta])*
        $vis:vis enum $T:ident {
            $( $(#[$vmeta:meta])* $V:ident = $word:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $T {
            $( $(#[$vmeta])* $V ),+
        }

        impl $T {
            /// Every value, in declaration order.
            pub const ALL: [$T; [$($word),+].len()] = [$($T::$V),+];
            /// Every value with its name, in declaration order.
            pub const WORDS: [(&'static str, $T); [$($word),+].len()] = [$(($word, $T::$V)),+];
            /// Every name, in declaration order.
            pub const NAMES: [&'static str; [$($word),+].len()] = [$($word),+];

            /// The name, as written in plans, files and on command lines.
            pub const fn name(self) -> &'static str {
                match self {
                    $($T::$V => $word),+
                }
            }

            /// The value named `name`.
            pub fn from_name(name: &str) -> Option<$T> {
                match name {
                    $($word => Some($T::$V),)+
                    _ => None,
                }
            }
        }

        impl ::core::fmt::Display for $T {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl $crate::words::__serde::Serialize for $T {
            fn serialize<S: $crate::words::__serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> $crate::words::__serde::Deserialize<'de> for $T {
            fn deserialize<D: $crate::words::__serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct Named;
                impl $crate::words::__serde::de::Visitor<'_> for Named {
                    type Value = $T;
                    fn expecting(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                        write!(f, "one of {:?}", $T::NAMES)
                    }
                    fn visit_str<E: $crate::words::__serde::de::Error>(self, v: &str) -> Result<$T, E> {
                        $T::from_name(v).ok_or_else(|| E::unknown_variant(v, &$T::NAMES))
                    }
                }
                d.deserialize_str(Named)
            }
        }
    };
}

/// Implements `clap::ValueEnum` for an enum declared with [`words!`], so a command line takes the
/// same names (with the `clap` feature).
#[cfg(feature = "clap")]
#[macro_export]
macro_rules! value_enum {
    ($T:ty) => {
        impl $crate::words::__clap::ValueEnum for $T {
            fn value_variants<'a>() -> &'a [Self] {
                &<$T>::ALL
            }
            fn to_possible_value(&self) -> Option<$crate::words::__clap::builder::PossibleValue> {
                Some($crate::words::__clap::builder::PossibleValue::new(self.name()))
            }
        }
    };
}

#[cfg(test)]
mod tests {
    crate::words! {
        /// Test enum.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        enum Mode {
            /// One.
            EverySession = "every_session",
            /// Two.
            Never = "never",
        }
    }

    #[test]
    fn one_table_in_every_direction() {
        assert_eq!(Mode::ALL.map(Mode::name), Mode::NAMES);
        assert_eq!(Mode::WORDS, [("every_session", Mode::EverySession), ("never", Mode::Never)]);
        for m in Mode::ALL {
            assert_eq!(Mode::from_name(m.name()), Some(m));
            assert_eq!(m.to_string(), m.name());
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(json, format!("\"{}\"", m.name()));
            assert_eq!(serde_json::from_str::<Mode>(&json).unwrap(), m);
        }
        assert_eq!(Mode::from_name("EverySession"), None);
        let err = serde_json::from_str::<Mode>("\"sometimes\"").unwrap_err().to_string();
        assert!(err.starts_with("unknown variant `sometimes`, expected `every_session` or `never`"), "{err}");
        let err = serde_json::from_str::<Mode>("3").unwrap_err().to_string();
        assert!(err.contains(r#"one of ["every_session", "never"]"#), "{err}");
    }
}
