//! `onFailure.brokerDelay`: a retryable failure goes back to the broker
//! with a reject (requeue), never acked, until the last attempt parks; a
//! reject the channel refuses holds its delivery.

use std::sync::atomic::Ordering;

use super::super::super::config::ConsumerConfig;
use super::super::super::handle::ConsumerHandle;
use super::super::fake::{ack, FakeSink, Op, Script};
use super::{config, failure, until};
use crate::retry::{BrokerDelay, ParkReason, Route};

fn broker_delay_config() -> ConsumerConfig {
    let mut quorum = config(None);
    quorum.topology.delays.clear();
    quorum.topology.delivery_limit = Some(3);
    quorum.topology.broker_delay = Some(BrokerDelay::parse("1s", "5s", 2).unwrap());
    quorum
}

/// A consumer with `brokerDelay` on `script`, its sink attached.
async fn attached(script: &Script) -> (ConsumerHandle, FakeSink) {
    let handle = ConsumerHandle::start_on(script.clone(), broker_delay_config())
        .await
        .unwrap();
    let sink = FakeSink::default();
    handle.attach(Box::new(sink.clone())).unwrap();
    (handle, sink)
}

#[tokio::test(start_paused = true)]
async fn with_broker_delay_a_retryable_failure_is_rejected_never_acked_and_the_last_parks() {
    let script = Script::default();
    let (handle, sink) = attached(&script).await;
    script.deliver(1);
    script.deliver_counted(2, 1);
    script.deliver_counted(3, 2);
    until("three deliveries", || sink.ids().len() == 3).await;
    let attempts: Vec<u32> = sink
        .batches()
        .iter()
        .flat_map(|b| b.deliveries.iter().map(|d| d.2))
        .collect();
    assert_eq!(
        attempts,
        vec![0, 1, 2],
        "attempts are the broker's x-delivery-count"
    );
    let ids = sink.ids();
    handle
        .settle_many(
            vec![],
            ids.iter().map(|&id| (id, failure("carrier 503"))).collect(),
        )
        .unwrap();
    until("three events", || sink.events().len() == 3).await;
    let mut events = sink.events();
    events.sort_unstable();
    assert_eq!(events, vec!["parked", "retry", "retry"]);
    // Only the third was routed through the link (the parked queue).
    assert_eq!(
        script.routes(),
        vec![(
            3,
            Route::Park {
                reason: ParkReason::Exhausted,
                attempt: 2
            }
        )]
    );
    until("the ack", || {
        script.ops().contains(&ack(1, 3, false)) || script.ops().contains(&ack(1, 3, true))
    })
    .await;
    let ops = script.ops();
    assert!(ops.contains(&Op::Reject { ch: 1, tag: 1 }));
    assert!(ops.contains(&Op::Reject { ch: 1, tag: 2 }));
    // A multiple ack of tag 3 covers 1 and 2 only after their rejects went out.
    let reject_2 = ops
        .iter()
        .position(|op| *op == Op::Reject { ch: 1, tag: 2 })
        .unwrap();
    let ack_3 = ops
        .iter()
        .position(|op| matches!(op, Op::Ack { tag: 3, .. }))
        .unwrap();
    assert!(reject_2 < ack_3, "{ops:?}");
    assert!(
        !ops.iter()
            .any(|op| matches!(op, Op::Ack { tag: 1 | 2, .. })),
        "{ops:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_refused_reject_holds_its_delivery_and_reports_the_failure() {
    let script = Script::default();
    script.refuse_rejects.store(true, Ordering::SeqCst);
    let (handle, sink) = attached(&script).await;
    script.deliver(1);
    script.deliver(2);
    until("two deliveries", || sink.ids().len() == 2).await;
    let ids = sink.ids();
    handle
        .settle_many(vec![ids[1]], vec![(ids[0], failure("carrier 503"))])
        .unwrap();
    until("the event", || !sink.events().is_empty()).await;
    assert_eq!(sink.events(), vec!["publish-failed"]);
    until("the ack of 2", || script.ops().contains(&ack(1, 2, false))).await;
    let ops = script.ops();
    assert!(ops.contains(&Op::Reject { ch: 1, tag: 1 }), "{ops:?}");
    // Tag 1 is held: no ack covers it, neither its own nor a multiple one.
    assert!(
        !ops.iter().any(|op| matches!(
            op,
            Op::Ack { tag: 1, .. }
                | Op::Ack {
                    tag: 2,
                    multiple: true,
                    ..
                }
        )),
        "{ops:?}"
    );
}
