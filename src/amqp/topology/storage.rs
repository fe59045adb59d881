//! How a classic retry queue stores its messages (`x-queue-version`,
//! `x-queue-mode`): chosen by the library where the broker lets a queue
//! choose, unless `retryQueueArguments` does, and kept as they are on a retry
//! queue that exists.

use lapin::types::{AMQPValue, FieldTable, ShortString};

use super::mismatch::existing_value;
use super::{long, QueueSpec, QueueType, Topology};
use crate::error::amqp_reply;
use crate::retry::{classic_queue_mode_is_chosen, classic_queue_version_is_chosen};

/// How a classic retry queue stores its messages: the library chooses these
/// where the broker lets a queue choose, unless `retryQueueArguments` does,
/// and a retry queue that exists keeps its own (one created on another
/// release of RabbitMQ, or of rabbit-retry, or by hand).
const STORAGE_ARGUMENTS: [&str; 2] = ["x-queue-version", "x-queue-mode"];

/// The classic queue version of retry queues, where the broker lets a queue
/// choose (RabbitMQ 3.10 to 3.13, which default to version 1): version 2
/// writes a message and its index entry in one place, which costs the broker
/// less CPU for every failure that a retry queue takes and gives back.
const RETRY_QUEUE_VERSION: i64 = 2;

/// The mode of classic retry queues, where the broker still honours one
/// (RabbitMQ 3.10 and 3.11, which keep a default queue's messages in memory
/// as well): a lazy queue writes a message to disk and leaves it there until
/// it is due, which costs the broker less CPU for every failure than keeping
/// a copy in memory and paging it out later.
const RETRY_QUEUE_MODE: &str = "lazy";

impl Topology {
    /// The storage arguments new retry queues get on a broker that reports
    /// `version`: `x-queue-version` 2 on RabbitMQ 3.10 to 3.13 and
    /// `x-queue-mode: lazy` on 3.10 and 3.11, for classic ones, unless
    /// `retryQueueArguments` chose already.
    pub(super) fn retry_storage(&self, version: Option<&str>) -> Vec<(&'static str, AMQPValue)> {
        let mut chosen = Vec::new();
        let Some(version) = version.filter(|_| self.queue_type == QueueType::Classic) else {
            return chosen;
        };
        let free = |key: &str| !self.extra.retry.contains_key(key);
        if classic_queue_version_is_chosen(version) && free("x-queue-version") {
            chosen.push((
                "x-queue-version",
                AMQPValue::LongLongInt(RETRY_QUEUE_VERSION),
            ));
        }
        if classic_queue_mode_is_chosen(version) && free("x-queue-mode") {
            chosen.push(("x-queue-mode", long(RETRY_QUEUE_MODE)));
        }
        chosen
    }

    /// The storage arguments of a retry queue that are the library's to
    /// choose (none the options set): a classic retry queue that exists with
    /// other values of these, or none, keeps them.
    pub(super) fn retry_adopts(&self) -> Vec<&'static str> {
        match self.queue_type {
            QueueType::Classic => STORAGE_ARGUMENTS
                .into_iter()
                .filter(|key| !self.extra.retry.contains_key(key))
                .collect(),
            QueueType::Quorum => Vec::new(),
        }
    }
}

/// The arguments that declare `spec` as it exists, when the broker refused
/// `args` only for an argument that is the library's to choose
/// (`spec.adopts`): a retry queue created with another version or mode (by
/// another release of RabbitMQ or of rabbit-retry, or by hand) keeps it.
pub(super) fn as_it_is(
    spec: &QueueSpec,
    args: &FieldTable,
    refusal: &lapin::Error,
) -> Option<FieldTable> {
    match amqp_reply(refusal)? {
        (406, text) => args_as_it_is(spec, args, &text),
        _ => None,
    }
}

/// [`as_it_is`] for the broker's reply `text`.
pub(super) fn args_as_it_is(spec: &QueueSpec, args: &FieldTable, text: &str) -> Option<FieldTable> {
    let (arg, current) = existing_value(text)?;
    let key = *spec.adopts.iter().find(|k| **k == arg)?;
    let mut inner = args.inner().clone();
    let key = ShortString::from(key);
    inner.remove(&key);
    if let Some(v) = current {
        inner.insert(key, v);
    }
    Some(FieldTable::from(inner))
}
