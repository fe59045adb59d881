//! What a broker's reported version (its `version` server property, such as
//! `4.3.6`, `3.10.8` or `4.3.0-rc.1`) says it can do. A version that does not
//! read as `major.minor` is taken as unknown, and unknown means "assume
//! nothing": no feature that needs a version, no default that depends on one.

/// The oldest RabbitMQ that holds returned messages in a delayed state.
pub(crate) const BROKER_DELAY_SINCE: (u32, u32) = (4, 3);

/// The first RabbitMQ that stores every classic queue in version 2.
const CLASSIC_V2_ONLY_SINCE: (u32, u32) = (4, 0);

/// The first RabbitMQ that ignores a classic queue's mode (`x-queue-mode`):
/// its classic queues move messages to disk early, as lazy ones did.
const QUEUE_MODE_IGNORED_SINCE: (u32, u32) = (3, 12);

/// The `major.minor` of `version`, when it reads as one.
pub(crate) fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version
        .split(['.', '-', '+'])
        .map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => Some((major, minor)),
        _ => None,
    }
}

/// Whether a broker that reports `version` holds returned messages in a
/// delayed state (`onFailure.brokerDelay`).
pub(crate) fn supports_broker_delay(version: &str) -> bool {
    major_minor(version).is_some_and(|v| v >= BROKER_DELAY_SINCE)
}

/// Whether a broker that reports `version` still stores a classic queue in
/// version 1 unless the queue asks for version 2 (`x-queue-version`):
/// RabbitMQ 3.10 to 3.13. 4.0 and later know only version 2 (and refuse
/// `x-queue-version: 1`); 3.9 and older know only version 1.
pub(crate) fn classic_queue_version_is_chosen(version: &str) -> bool {
    major_minor(version).is_some_and(|v| (3, 10) <= v && v < CLASSIC_V2_ONLY_SINCE)
}

/// Whether a broker that reports `version` still keeps a classic queue's
/// messages in memory unless the queue asks for the lazy mode
/// (`x-queue-mode: lazy`): RabbitMQ 3.10 and 3.11. 3.12 and later ignore the
/// mode, and behave as lazy queues did.
pub(crate) fn classic_queue_mode_is_chosen(version: &str) -> bool {
    major_minor(version).is_some_and(|v| (3, 10) <= v && v < QUEUE_MODE_IGNORED_SINCE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_delay_needs_4_3() {
        for (v, ok) in [
            ("4.3.6", true),
            ("4.3.0-rc.1", true),
            ("4.4.0", true),
            ("5.0.0", true),
            ("4.2.9", false),
            ("3.10.0", false),
            ("3.13.7", false),
            ("", false),
            ("unknown", false),
        ] {
            assert_eq!(supports_broker_delay(v), ok, "{v}");
        }
    }

    #[test]
    fn the_classic_queue_version_is_chosen_on_3_10_to_3_13() {
        for (v, chosen) in [
            ("3.10.8", true),
            ("3.10.0-rc.1", true),
            ("3.12.14", true),
            ("3.13.7", true),
            ("3.9.29", false),
            ("4.0.0", false),
            ("4.3.6", false),
            ("", false),
            ("3", false),
            ("unknown", false),
        ] {
            assert_eq!(classic_queue_version_is_chosen(v), chosen, "{v}");
        }
    }

    #[test]
    fn reads_major_and_minor() {
        assert_eq!(major_minor("3.10.8"), Some((3, 10)));
        assert_eq!(major_minor("4.3.0-rc.1"), Some((4, 3)));
        assert_eq!(major_minor("4+build"), None);
        assert_eq!(major_minor("x.y"), None);
    }

    #[test]
    fn the_classic_queue_mode_is_chosen_on_3_10_and_3_11() {
        for (v, chosen) in [
            ("3.10.8", true),
            ("3.11.28", true),
            ("3.12.0", false),
            ("3.13.7", false),
            ("4.3.6", false),
            ("3.9.29", false),
            ("", false),
        ] {
            assert_eq!(classic_queue_mode_is_chosen(v), chosen, "{v}");
        }
    }
}
