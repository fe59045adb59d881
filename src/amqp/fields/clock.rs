//! The wall clock the `retry-*` time headers are written with.

/// Milliseconds since the Unix epoch, for the `retry-*` time headers.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
