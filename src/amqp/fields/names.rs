//! Names as AMQP short strings, refused with a clear error when too long.

use lapin::types::ShortString;

use crate::error::{Error, ErrorKind, Result};

/// `value` as an AMQP short string (queue, exchange and routing-key names),
/// or an `INVALID_OPTIONS` error naming `what` when it is over 255 bytes.
pub(crate) fn short_name(what: &str, value: &str) -> Result<ShortString> {
    ShortString::try_new(value).map_err(|_| {
        Error::new(
            ErrorKind::InvalidOptions,
            format!(
                "{what} '{}…' is {} bytes long; AMQP names are at most 255 bytes",
                cut(value, 40),
                value.len()
            ),
        )
    })
}

/// The first `n` bytes of `s` at most, cut at a character boundary.
pub(super) fn cut(s: &str, n: usize) -> &str {
    let mut end = n.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
