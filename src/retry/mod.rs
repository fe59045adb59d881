//! Pure retry logic: delays, attempt counting, the failure verdict (where a
//! delivery goes, in `verdict`), header building and naming. Nothing here
//! does I/O, so every rule can be tested on its own.

pub(crate) mod attempt;
pub(crate) mod backoff;
pub(crate) mod broker_delay;
pub(crate) mod delay;
pub(crate) mod headers;
pub(crate) mod names;
pub(crate) mod republish;
pub(crate) mod route;
pub(crate) mod time;
pub(crate) mod verdict;
pub(crate) mod versions;

pub(crate) use attempt::{attempt_count, FieldValue};
pub(crate) use backoff::{jitter, Backoff};
pub(crate) use broker_delay::BrokerDelay;
pub(crate) use delay::{parse_delays, Delay, DelayError};
pub(crate) use headers::{
    is_broker_death_header, is_own_header, is_routing_header, FailureInput, HeaderValue, FRAME_MAX,
    RETRY_DROPPED_HEADERS, RETRY_ORIGINAL_USER_ID,
};
pub(crate) use names::{
    parked_queue_name, retry_queue_name, validate_name, validate_topology_names,
};
pub(crate) use republish::{copy_headers, ProducerHeader};
pub(crate) use route::{ParkReason, Route};
pub(crate) use verdict::{verdict, Facts, Policy, Thrown, Verdict};
pub(crate) use versions::{
    classic_queue_mode_is_chosen, classic_queue_version_is_chosen, supports_broker_delay,
};
