//! UTC timestamps for headers, without a date library.

/// Formats milliseconds since the Unix epoch as `2026-11-30T07:14:22.123Z`.
pub(crate) fn iso8601_utc(ms_since_epoch: u64) -> String {
    const MS_PER_DAY: u64 = 86_400_000;
    let days = ms_since_epoch / MS_PER_DAY;
    let ms_of_day = ms_since_epoch % MS_PER_DAY;
    let (year, month, day) = civil_from_days(days);
    let (h, rest) = (ms_of_day / 3_600_000, ms_of_day % 3_600_000);
    let (m, rest) = (rest / 60_000, rest % 60_000);
    let (s, ms) = (rest / 1_000, rest % 1_000);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{ms:03}Z")
}

/// Parses what [`iso8601_utc`] writes (`2026-11-30T07:14:22.123Z`; the
/// fraction may be absent) back to milliseconds since the epoch; `None` for
/// anything else or a date before 1970.
pub(crate) fn parse_iso8601_utc(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<u64> {
        let part = s.get(from..to)?;
        if part.bytes().all(|c| c.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (h, m, sec) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    let rest = &s[19..];
    let ms = match rest {
        "Z" => 0,
        _ if rest.starts_with('.') && rest.ends_with('Z') && rest.len() >= 3 => {
            let frac = &rest[1..rest.len() - 1];
            if !frac.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            let digits: String = frac.chars().chain("000".chars()).take(3).collect();
            digits.parse().ok()?
        }
        _ => return None,
    };
    if year < 1970
        || !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || h > 23
        || m > 59
        || sec > 60
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(((days * 24 + h) * 60 + m) * 60_000 + sec * 1_000 + ms)
}

/// Howard Hinnant's days_from_civil, the inverse of `civil_from_days`.
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Howard Hinnant's civil_from_days, for days since 1970-01-01 (never
/// negative here, so unsigned arithmetic is enough).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // Shift the epoch to 0000-03-01 so leap days fall at the end of a year.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // Expected values checked with `date -u -d @SECONDS`.
        let cases = [
            (0, "1970-01-01T00:00:00.000Z"),
            (1, "1970-01-01T00:00:00.001Z"),
            (86_399_999, "1970-01-01T23:59:59.999Z"),
            (86_400_000, "1970-01-02T00:00:00.000Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (951_868_800_000, "2000-03-01T00:00:00.000Z"),
            (1_709_251_199_000, "2024-02-29T23:59:59.000Z"),
            (1_798_588_800_123, "2026-12-30T00:00:00.123Z"),
            (1_798_590_862_123, "2026-12-30T00:34:22.123Z"),
            (4_102_444_799_999, "2099-12-31T23:59:59.999Z"),
            (253_402_300_799_000, "9999-12-31T23:59:59.000Z"),
        ];
        for (ms, want) in cases {
            assert_eq!(iso8601_utc(ms), want, "{ms}");
        }
    }

    #[test]
    fn extreme_input_does_not_panic() {
        assert!(iso8601_utc(u64::MAX).ends_with('Z'));
    }
}

#[cfg(test)]
mod parse_tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects() {
        for ms in [
            0u64,
            1,
            951_782_400_000,
            1_796_023_327_689,
            4_102_444_799_999,
        ] {
            assert_eq!(parse_iso8601_utc(&iso8601_utc(ms)), Some(ms), "{ms}");
        }
        assert_eq!(
            parse_iso8601_utc("2026-11-30T07:14:22Z"),
            Some(1_796_022_862_000)
        );
        assert_eq!(
            parse_iso8601_utc("2026-11-30T07:14:22.5Z"),
            Some(1_796_022_862_500)
        );
        for bad in [
            "",
            "2026-11-30",
            "2026-11-30T07:14:22.123",
            "1969-12-31T23:59:59.000Z",
            "2026-13-01T00:00:00Z",
            "2026-11-30T07:14:22.12xZ",
            "20x6-11-30T07:14:22Z",
        ] {
            assert_eq!(parse_iso8601_utc(bad), None, "{bad}");
        }
    }
}
