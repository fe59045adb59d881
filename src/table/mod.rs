//! The retry table: failures that wait on a person or a condition, not a
//! clock, kept as rows in PostgreSQL (`message_retries`) and published again
//! by a scheduler at a bounded rate when they are due.

mod intake;
mod rate;
pub(crate) mod row;
pub(crate) mod scheduler;
pub(crate) mod schema;
pub(crate) mod store;
mod tls;
