//! UTC timestamps for headers, without a date library.

/// Formats milliseconds since the Unix epoch as `2026-11-30T07:14:22.123Z`.
pub fn iso8601_utc(ms_since_epoch: u64) -> String {
    const MS_PER_DAY: u64 = 86_400_000;
    let days = ms_since_epoch / MS_PER_DAY;
    let ms_of_day = ms_since_epoch % MS_PER_DAY;
    let (year, month, day) = civil_from_days(days);
    let (h, rest) = (ms_of_day / 3_600_000, ms_of_day % 3_600_000);
    let (m, rest) = (rest / 60_000, rest % 60_000);
    let (s, ms) = (rest / 1_000, rest % 1_000);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{ms:03}Z")
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
