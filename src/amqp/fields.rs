//! Conversions between lapin's AMQP field values and the core's broker-neutral
//! values, and to and from JSON for the JavaScript side: one concept a file.

mod clock;
mod json;
mod names;
mod size;
mod trace;
mod undecodable;
mod values;

pub(crate) use self::clock::now_ms;
pub(crate) use self::json::{table_from_json, table_to_json};
pub(crate) use self::names::short_name;
pub(crate) use self::size::{encoded_size, properties_size, table_size, CONTENT_HEADER_OVERHEAD};
pub(crate) use self::trace::{with_trace, TRACEPARENT, TRACESTATE};
pub(crate) use self::undecodable::undecodable_field;
pub(crate) use self::values::{attempt_of, header, header_str, to_field_value};

#[cfg(test)]
mod tests;
