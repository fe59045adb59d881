//! A consumer of one work queue. A single task per consumer takes the
//! deliveries, hands them to JavaScript in batches through a [`Sink`],
//! acks the ones JavaScript settled as handled and routes the failures
//! (confirmed republish to a retry or parked queue, then ack; acks go out as
//! one `multiple` frame for each settled prefix of delivery tags).
//!
//! `handle` is the API the binding calls, `facts` what the verdict
//! (`retry::verdict`) weighs of a delivery, `link` what the task needs from the
//! broker (lapin, or a scripted broker in tests), `steps` the bounded broker
//! round trips of starting, recovering and stopping, `sink` where deliveries
//! and events go, `task` the state machine that owns the channel (consume,
//! settle, recover, stop), `failure` republishes a failed delivery (or stores
//! it in the retry table), and `acks` orders the acks.
//!
//! The types they share each have a module of their own: `config` what a
//! consumer is told, `limits` its fixed bounds, `settlement` how JavaScript
//! settled a delivery, `event` what JavaScript is told (serialised as it
//! crosses), `command` what the handle asks of the task, `state` what the
//! consumer is doing, `pending` a delivery not settled yet, and `timeouts`
//! the consumer timeouts the consumer counts itself.

mod acks;
mod command;
mod config;
mod defaults;
mod event;
mod facts;
mod failure;
mod fault;
mod handle;
mod limits;
mod link;
mod pending;
mod settlement;
mod sink;
mod state;
mod steps;
mod task;
mod timeouts;

pub(crate) use command::ProbeOutcome;
pub(crate) use config::{
    ConsumerConfig, Recovery, TableConfig, DEFAULT_CONSUMER_TIMEOUT_MS, DEFAULT_DELIVERY_LIMIT,
    DEFAULT_PREFETCH, DEFAULT_TABLE_MAX_ATTEMPTS,
};
pub(crate) use event::Event;
pub(crate) use handle::ConsumerHandle;
pub(crate) use settlement::{Failure, TableFailure};
pub(crate) use sink::{DeliveryView, Sink};
