//! What a consumer is doing, shared between its task and its handle.

/// What a consumer is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConsumerState {
    /// Receiving deliveries.
    Connected,
    /// The channel or connection was lost; reconnecting with backoff.
    Recovering,
    /// Closed, or recovery gave up.
    Closed,
}

impl ConsumerState {
    /// `connected`, `recovering` or `closed`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ConsumerState::Connected => "connected",
            ConsumerState::Recovering => "recovering",
            ConsumerState::Closed => "closed",
        }
    }
}

/// Locks `m`, also after a panic elsewhere poisoned it: the state behind these
/// locks (the inbox's items, the consumer's state) is valid at every step.
pub(super) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
