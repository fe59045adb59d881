//! Retry delays: parsing user input such as `"5s"` and naming delays in a
//! stable, readable way for queue names.

use std::fmt;

/// The longest delay RabbitMQ accepts as `x-message-ttl` (2^32 - 1 ms).
pub(crate) const MAX_DELAY_MS: u64 = u32::MAX as u64;

/// A positive retry delay of at most [`MAX_DELAY_MS`] milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Delay {
    ms: u64,
}

impl Delay {
    /// Builds a delay, rejecting zero and values RabbitMQ cannot hold as a TTL.
    pub(crate) fn from_millis(ms: u64) -> Result<Delay, DelayError> {
        if ms == 0 {
            return Err(DelayError::Zero {
                input: format!("{ms}ms"),
            });
        }
        if ms > MAX_DELAY_MS {
            return Err(DelayError::TooLarge {
                input: format!("{ms}ms"),
            });
        }
        Ok(Delay { ms })
    }

    /// The delay in milliseconds.
    pub(crate) fn millis(&self) -> u64 {
        self.ms
    }

    /// The delay in the largest unit that divides it exactly (`"5s"`, `"90m"`),
    /// so queue names stay short and the same delay always gets the same name.
    pub(crate) fn label(&self) -> String {
        const UNITS: [(u64, &str); 4] = [(3_600_000, "h"), (60_000, "m"), (1_000, "s"), (1, "ms")];
        let (size, unit) = UNITS
            .into_iter()
            .find(|(size, _)| self.ms.is_multiple_of(*size))
            .unwrap_or((1, "ms"));
        format!("{}{unit}", self.ms / size)
    }
}

impl fmt::Display for Delay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// Why a delay or a list of delays was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DelayError {
    /// The input was empty or only whitespace.
    Empty,
    /// The input is not a whole number followed by a known unit.
    Invalid {
        /// The rejected input.
        input: String,
    },
    /// The input is zero, which would retry without waiting.
    Zero {
        /// The rejected input.
        input: String,
    },
    /// The input is longer than RabbitMQ's largest message TTL.
    TooLarge {
        /// The rejected input.
        input: String,
    },
    /// The entry at `index` is not longer than the one before it.
    Unsorted {
        /// Position of the entry in the list.
        index: usize,
        /// The rejected entry.
        input: String,
    },
    /// The entry at `index` has the same length as an earlier one.
    Duplicate {
        /// Position of the entry in the list.
        index: usize,
        /// The rejected entry.
        input: String,
    },
}

const FORMAT_HINT: &str =
    "use a positive whole number with a unit of ms, s, m or h, such as \"500ms\", \"5s\", \"1m\", \"2h\"";

impl fmt::Display for DelayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DelayError::Empty => write!(f, "delay is empty: {FORMAT_HINT}"),
            DelayError::Invalid { input } => {
                write!(f, "delay \"{input}\" is not valid: {FORMAT_HINT}")
            }
            DelayError::Zero { input } => {
                write!(f, "delay \"{input}\" is zero: use a delay of at least 1ms")
            }
            DelayError::TooLarge { input } => write!(
                f,
                "delay \"{input}\" is too long: RabbitMQ accepts at most {MAX_DELAY_MS}ms (about 49 days)"
            ),
            DelayError::Unsorted { index, input } => write!(
                f,
                "delays must be in increasing order: \"{input}\" at index {index} is not longer than the one before it"
            ),
            DelayError::Duplicate { index, input } => write!(
                f,
                "delay \"{input}\" at index {index} repeats an earlier delay: list each delay once"
            ),
        }
    }
}

impl std::error::Error for DelayError {}

/// Parses `<positive integer><unit>` with unit `ms`, `s`, `m` or `h`; a bare
/// number means milliseconds. Surrounding whitespace is ignored.
pub(crate) fn parse_delay(s: &str) -> Result<Delay, DelayError> {
    let input = s.trim();
    if input.is_empty() {
        return Err(DelayError::Empty);
    }
    let invalid = || DelayError::Invalid {
        input: input.to_string(),
    };
    let split = input
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(input.len());
    let (digits, unit) = input.split_at(split);
    if digits.is_empty() {
        return Err(invalid());
    }
    let factor: u64 = match unit {
        "" | "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(invalid()),
    };
    let too_large = || DelayError::TooLarge {
        input: input.to_string(),
    };
    // Only digits remain, so a parse failure can only be overflow.
    let value: u64 = digits.parse().map_err(|_| too_large())?;
    let ms = value.checked_mul(factor).ok_or_else(too_large)?;
    if ms == 0 {
        return Err(DelayError::Zero {
            input: input.to_string(),
        });
    }
    if ms > MAX_DELAY_MS {
        return Err(too_large());
    }
    Ok(Delay { ms })
}

/// Parses a list of delays, which must be strictly increasing so each retry
/// waits longer than the last and every retry queue name is distinct.
pub(crate) fn parse_delays(items: &[String]) -> Result<Vec<Delay>, DelayError> {
    let mut out: Vec<Delay> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let delay = parse_delay(item)?;
        let input = || item.trim().to_string();
        if out.contains(&delay) {
            return Err(DelayError::Duplicate {
                index,
                input: input(),
            });
        }
        if out.last().is_some_and(|prev| delay <= *prev) {
            return Err(DelayError::Unsorted {
                index,
                input: input(),
            });
        }
        out.push(delay);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(ms: u64) -> Delay {
        Delay::from_millis(ms).unwrap()
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn labels() {
        let cases = [
            (1, "1ms"),
            (500, "500ms"),
            (1_500, "1500ms"),
            (1_000, "1s"),
            (5_000, "5s"),
            (90_000, "90s"),
            (60_000, "1m"),
            (600_000, "10m"),
            (5_400_000, "90m"),
            (3_600_000, "1h"),
            (7_200_000, "2h"),
            (86_400_000, "24h"),
            (MAX_DELAY_MS, "4294967295ms"),
        ];
        for (ms, label) in cases {
            assert_eq!(d(ms).label(), label, "{ms}");
            assert_eq!(d(ms).to_string(), label, "{ms}");
            assert_eq!(parse_delay(label), Ok(d(ms)), "label round-trips: {label}");
        }
    }

    #[test]
    fn from_millis_limits() {
        assert!(matches!(
            Delay::from_millis(0),
            Err(DelayError::Zero { .. })
        ));
        assert!(matches!(
            Delay::from_millis(MAX_DELAY_MS + 1),
            Err(DelayError::TooLarge { .. })
        ));
        assert_eq!(Delay::from_millis(7).unwrap().millis(), 7);
    }

    #[test]
    fn parse_ok() {
        let cases = [
            ("250", 250),
            ("250ms", 250),
            ("5s", 5_000),
            ("1m", 60_000),
            ("2h", 7_200_000),
            ("  5s\t", 5_000),
            ("\n10m ", 600_000),
            ("007s", 7_000),
            ("4294967295", MAX_DELAY_MS),
            ("4294967295ms", MAX_DELAY_MS),
            ("1193h", 1193 * 3_600_000),
        ];
        for (input, ms) in cases {
            assert_eq!(parse_delay(input).map(|x| x.millis()), Ok(ms), "{input:?}");
        }
    }

    #[test]
    fn parse_errors() {
        let invalid = |s: &str| DelayError::Invalid {
            input: s.to_string(),
        };
        let zero = |s: &str| DelayError::Zero {
            input: s.to_string(),
        };
        let large = |s: &str| DelayError::TooLarge {
            input: s.to_string(),
        };
        let cases = [
            ("", DelayError::Empty),
            ("   ", DelayError::Empty),
            ("0", zero("0")),
            ("0s", zero("0s")),
            ("000ms", zero("000ms")),
            ("0h", zero("0h")),
            ("-5s", invalid("-5s")),
            ("+5s", invalid("+5s")),
            ("1.5s", invalid("1.5s")),
            ("5d", invalid("5d")),
            ("5 s", invalid("5 s")),
            ("5S", invalid("5S")),
            ("5sec", invalid("5sec")),
            ("s", invalid("s")),
            ("ms", invalid("ms")),
            ("5s5", invalid("5s5")),
            ("５s", invalid("５s")),
            ("4294967296", large("4294967296")),
            ("4294968s", large("4294968s")),
            ("1194h", large("1194h")),
            ("18446744073709551615h", large("18446744073709551615h")),
            ("99999999999999999999999", large("99999999999999999999999")),
        ];
        for (input, err) in cases {
            assert_eq!(parse_delay(input), Err(err), "{input:?}");
        }
    }

    #[test]
    fn parse_list() {
        assert_eq!(parse_delays(&[]), Ok(vec![]));
        assert_eq!(
            parse_delays(&strings(&["5s", "1m", "10m"])),
            Ok(vec![d(5_000), d(60_000), d(600_000)])
        );
        let cases = [
            (
                vec!["5s", "5000ms"],
                DelayError::Duplicate {
                    index: 1,
                    input: "5000ms".into(),
                },
            ),
            (
                vec!["1s", "5s", "1s"],
                DelayError::Duplicate {
                    index: 2,
                    input: "1s".into(),
                },
            ),
            (
                vec!["500ms", "5s", "2s"],
                DelayError::Unsorted {
                    index: 2,
                    input: "2s".into(),
                },
            ),
            (vec!["5s", "x"], DelayError::Invalid { input: "x".into() }),
            (vec!["5s", " "], DelayError::Empty),
        ];
        for (items, err) in cases {
            assert_eq!(parse_delays(&strings(&items)), Err(err), "{items:?}");
        }
    }

    #[test]
    fn messages() {
        assert_eq!(
            DelayError::Invalid { input: "5d".into() }.to_string(),
            "delay \"5d\" is not valid: use a positive whole number with a unit of ms, s, m or h, such as \"500ms\", \"5s\", \"1m\", \"2h\""
        );
        assert_eq!(
            DelayError::Unsorted {
                index: 2,
                input: "1s".into()
            }
            .to_string(),
            "delays must be in increasing order: \"1s\" at index 2 is not longer than the one before it"
        );
        let all = [
            DelayError::Empty,
            DelayError::Zero { input: "0s".into() },
            DelayError::TooLarge {
                input: "50d".into(),
            },
            DelayError::Duplicate {
                index: 1,
                input: "5s".into(),
            },
        ];
        for e in all {
            let boxed: Box<dyn std::error::Error> = Box::new(e.clone());
            assert!(!boxed.to_string().is_empty());
            assert!(e.to_string().contains(':'), "says what to do: {e}");
        }
    }
}
