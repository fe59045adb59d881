//! The size of field tables and content-header properties as encoded on the
//! wire, for keeping a message's headers inside one frame.

use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::BasicProperties;

/// The size of `v` as encoded on the wire, for keeping header tables inside a frame.
pub(crate) fn encoded_size(v: &AMQPValue) -> usize {
    1 + match v {
        AMQPValue::Boolean(_) | AMQPValue::ShortShortInt(_) | AMQPValue::ShortShortUInt(_) => 1,
        AMQPValue::ShortInt(_) | AMQPValue::ShortUInt(_) => 2,
        AMQPValue::LongInt(_) | AMQPValue::LongUInt(_) | AMQPValue::Float(_) => 4,
        AMQPValue::LongLongInt(_) | AMQPValue::Double(_) | AMQPValue::Timestamp(_) => 8,
        AMQPValue::DecimalValue(_) => 5,
        AMQPValue::ShortString(s) => 1 + s.wire_bytes().len(),
        AMQPValue::LongString(s) => 4 + s.as_bytes().len(),
        AMQPValue::FieldArray(a) => 4 + a.as_slice().iter().map(encoded_size).sum::<usize>(),
        AMQPValue::FieldTable(t) => table_size(t),
        AMQPValue::ByteArray(b) => 4 + b.as_slice().len(),
        AMQPValue::Void => 0,
    }
}

/// The encoded size of a whole field table.
pub(crate) fn table_size(t: &FieldTable) -> usize {
    4 + t
        .inner()
        .iter()
        .map(|(k, v)| 1 + k.wire_bytes().len() + encoded_size(v))
        .sum::<usize>()
}

/// The encoded size of a content header's properties (property flags and
/// every property present, the header table included).
pub(crate) fn properties_size(p: &BasicProperties) -> usize {
    let short = |s: &Option<ShortString>| s.as_ref().map_or(0, |s| 1 + s.wire_bytes().len());
    2 + short(p.content_type())
        + short(p.content_encoding())
        + p.headers().as_ref().map_or(0, table_size)
        + p.delivery_mode().map_or(0, |_| 1)
        + p.priority().map_or(0, |_| 1)
        + short(p.correlation_id())
        + short(p.reply_to())
        + short(p.expiration())
        + short(p.message_id())
        + p.timestamp().map_or(0, |_| 8)
        + short(p.kind())
        + short(p.user_id())
        + short(p.app_id())
        + short(p.cluster_id())
}

/// A content header frame's bytes besides its properties: frame type,
/// channel, size and end marker (8), class, weight and body size (12).
pub(crate) const CONTENT_HEADER_OVERHEAD: usize = 20;
