//! Pure retry logic: delays, attempt counting, routing, header building and
//! naming. Nothing here does I/O, so every rule can be tested on its own.

pub mod attempt;
pub mod backoff;
pub mod delay;
pub mod headers;
pub mod names;
pub mod route;
pub mod time;

pub use attempt::{attempt_count, FieldValue};
pub use backoff::Backoff;
pub use delay::{parse_delay, parse_delays, Delay, DelayError};
pub use headers::{
    entry_size, failure_headers, is_broker_death_header, is_own_header, FailureInput, HeaderValue,
    NoRoom, FRAME_MAX, RETRY_DROPPED_HEADERS, RETRY_ORIGINAL_USER_ID,
};
pub use names::{
    parked_queue_name, retry_queue_name, validate_name, validate_topology_names, NameError,
};
pub use route::{
    exceeds_delivery_limit, route_failure, route_failure_with_table, ParkReason, Route,
};
