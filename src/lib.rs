#![deny(clippy::all)]
//! rabbit-retry: the failure path of a RabbitMQ consumer.
//!
//! `retry` is the pure decision logic (no I/O), `amqp` talks to the broker
//! through lapin, `table` keeps retries in PostgreSQL, and `binding` is the
//! only place that knows about Node-API.

pub mod amqp;
pub mod binding;
pub mod retry;
pub mod table;
