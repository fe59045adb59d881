//! How a classic retry queue stores its messages (`x-queue-version`,
//! `x-queue-mode`): chosen by the library where the broker lets a queue
//! choose, unless `retryQueueArguments` does, and kept as they are on a retry
//! queue that exists.

use lapin::types::{AMQPValue, FieldTable, ShortString};

use super::mismatch::existing_value;
use super::{long, QueueSpec, QueueType, Topology};
use crate::error::amqp_reply;
use crate::retry::{classic_queue_mode_is_chosen, classic_queue_version_is_chosen};

/// How a classic retry queue stores its messages, one argument each: the
/// versions of RabbitMQ that let a queue choose it, and the library's choice
/// there. The library chooses these unless `retryQueueArguments` does, and a
/// retry queue that exists keeps its own (one created on another release of
/// RabbitMQ, or of rabbit-retry, or by hand).
const STORAGE_ARGUMENTS: [StorageArgument; 2] = [
    // Version 2 (RabbitMQ 3.10 to 3.13 default to version 1) writes a message
    // and its index entry in one place, which costs the broker less CPU for
    // every failure that a retry queue takes and gives back.
    StorageArgument {
        key: "x-queue-version",
        chosen_on: classic_queue_version_is_chosen,
        choice: Choice::Int(2),
    },
    // Lazy (RabbitMQ 3.10 and 3.11 keep a default queue's messages in memory
    // as well) writes a message to disk and leaves it there until it is due,
    // which costs the broker less CPU for every failure than keeping a copy
    // in memory and paging it out later.
    StorageArgument {
        key: "x-queue-mode",
        chosen_on: classic_queue_mode_is_chosen,
        choice: Choice::Text("lazy"),
    },
];

/// A storage argument of classic retry queues.
#[derive(Clone, Copy)]
struct StorageArgument {
    /// The queue argument.
    key: &'static str,
    /// Whether a broker that reports this version lets a queue choose it.
    chosen_on: fn(&str) -> bool,
    /// What the library chooses there.
    choice: Choice,
}

/// The value the library chooses for a storage argument.
#[derive(Clone, Copy)]
enum Choice {
    Int(i64),
    Text(&'static str),
}

impl Choice {
    fn value(self) -> AMQPValue {
        match self {
            Choice::Int(n) => AMQPValue::LongLongInt(n),
            Choice::Text(s) => long(s),
        }
    }
}

impl Topology {
    /// The storage arguments new retry queues get on a broker that reports
    /// `version`: of the ones that are the library's to choose (see
    /// [`Topology::retry_adopts`]), those the broker lets a queue choose:
    /// `x-queue-version` 2 on RabbitMQ 3.10 to 3.13 and `x-queue-mode: lazy`
    /// on 3.10 and 3.11.
    pub(super) fn retry_storage(&self, version: Option<&str>) -> Vec<(&'static str, AMQPValue)> {
        let Some(version) = version else {
            return Vec::new();
        };
        STORAGE_ARGUMENTS
            .into_iter()
            .filter(|a| self.adopts(a.key) && (a.chosen_on)(version))
            .map(|a| (a.key, a.choice.value()))
            .collect()
    }

    /// The storage arguments of a retry queue that are the library's to
    /// choose: those of a classic one that the options do not set. A retry
    /// queue that exists with other values of these, or none, keeps them.
    pub(super) fn retry_adopts(&self) -> Vec<&'static str> {
        STORAGE_ARGUMENTS
            .into_iter()
            .map(|a| a.key)
            .filter(|key| self.adopts(key))
            .collect()
    }

    /// Whether the storage argument `key` of retry queues is the library's to choose.
    fn adopts(&self, key: &str) -> bool {
        self.queue_type == QueueType::Classic && !self.extra.retry.contains_key(key)
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
