//! The consumer's own count of consumer timeouts, and the deliveries the
//! verdict refuses before their handler, handed over when moves are watched.

use std::time::Duration;

use super::super::super::handle::ConsumerHandle;
use super::super::fake::{FakeSink, Op, Script};
use super::{config, until};
use crate::retry::{ParkReason, Route};

#[tokio::test(start_paused = true)]
async fn a_consumer_timeout_counts_toward_the_delivery_limit() {
    let script = Script::default();
    let mut quorum = config(None);
    quorum.topology.delivery_limit = Some(2);
    quorum.consumer_timeout_ms = Some(1_000);
    let handle = ConsumerHandle::start_on(script.clone(), quorum)
        .await
        .unwrap();
    let sink = FakeSink::default();
    handle.attach(Box::new(sink.clone())).unwrap();
    // The handler outlives the timeout twice: the broker takes the message
    // back and cancels the consumer, without counting it in x-delivery-count.
    for round in 1..=2 {
        script.deliver(1);
        until("a delivery", || sink.ids().len() == round).await;
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        script.cancel_from_broker();
        until("consuming again", || script.subscriptions() == round + 1).await;
    }
    // The first handler ends now: its ack cannot take.
    handle.settle_many(vec![1], vec![]).unwrap();
    until("taken back", || sink.events().contains(&"taken-back")).await;
    assert!(!script.ops().iter().any(|op| matches!(op, Op::Ack { .. })));
    script.deliver(1);
    until("parked", || !script.routes().is_empty()).await;
    let park = Route::Park {
        reason: ParkReason::ConsumerTimeout,
        attempt: 0,
    };
    assert_eq!(script.routes(), vec![(3, park)]);
    assert_eq!(
        sink.ids(),
        vec![1, 2],
        "the handler ran as often as the limit"
    );
    assert_eq!(
        sink.events()
            .iter()
            .filter(|e| **e == "disconnected")
            .count(),
        2
    );
}

#[tokio::test(start_paused = true)]
async fn a_cancel_with_no_delivery_past_the_timeout_counts_nothing() {
    let script = Script::default();
    let mut quorum = config(None);
    quorum.topology.delivery_limit = Some(1);
    quorum.consumer_timeout_ms = Some(60_000);
    let handle = ConsumerHandle::start_on(script.clone(), quorum)
        .await
        .unwrap();
    let sink = FakeSink::default();
    handle.attach(Box::new(sink.clone())).unwrap();
    script.deliver(1);
    until("a delivery", || sink.ids().len() == 1).await;
    script.cancel_from_broker();
    until("consuming again", || script.subscriptions() == 2).await;
    script.deliver(1);
    until("handed over again", || sink.ids().len() == 2).await;
    assert!(script.routes().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_delivery_refused_before_its_handler_is_handed_over_only_when_moves_are_watched() {
    for watched in [false, true] {
        let script = Script::default();
        let mut quorum = config(None);
        quorum.topology.delivery_limit = Some(3);
        let handle = ConsumerHandle::start_on(script.clone(), quorum)
            .await
            .unwrap();
        let sink = FakeSink::default();
        handle.attach(Box::new(sink.clone())).unwrap();
        handle.heard(true, true, watched).unwrap();
        // The task takes the listeners in before the first delivery: a
        // delivery that came first would not be watched yet.
        tokio::time::sleep(Duration::from_millis(10)).await;
        script.deliver_counted(1, 3);
        script.deliver(2);
        until("the park", || sink.events().contains(&"parked")).await;
        until("the handed delivery", || sink.ids() == vec![2]).await;
        let refused: Vec<u64> = sink
            .batches()
            .iter()
            .flat_map(|b| b.refused.clone())
            .collect();
        assert_eq!(
            refused,
            if watched { vec![1] } else { vec![] },
            "watched: {watched}"
        );
    }
}
