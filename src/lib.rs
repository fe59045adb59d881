#![deny(clippy::all)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![warn(unreachable_pub)]
// The binding is what uses the rest, and it is not built into unit tests:
// dead code is checked in the library build.
#![cfg_attr(test, allow(dead_code))]
//! rabbit-retry: the failure path of a RabbitMQ consumer.
//!
//! The modules form one chain; each imports only those above it in this list:
//!
//! - `retry`: the pure rules (delays, queue names, routing a failure, the
//!   failure headers, attempt counting); no I/O.
//! - `error`, `redact`: the error type with its stable codes, and the one
//!   redaction: connection strings and messages without their passwords.
//! - `amqp`: the broker through lapin: the connection and its confirmed
//!   publishers, topology, parked-queue sessions, header fields.
//! - `table`: the retry table in PostgreSQL and its scheduler (which publishes
//!   through `amqp`).
//! - `outbox`: the transactional outbox's relay, which publishes through
//!   `amqp` the rows committed in `table`'s database.
//! - `consumer`: a consumer of one work queue: the task that owns its channel,
//!   the hand-off to JavaScript, acks, and failure routing to `amqp` or `table`.
//! - `binding`: the only module that knows about Node-API.

mod amqp;
mod binding;
mod consumer;
mod error;
mod outbox;
mod redact;
mod retry;
mod table;
