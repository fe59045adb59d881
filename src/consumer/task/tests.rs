//! The task's ordering against a scripted broker: what reaches JavaScript,
//! which acks go out on which channel, recovery, holding, stop and finish.
//! Time is tokio's paused clock, so waits of seconds take none.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::super::command::ProbeOutcome;
use super::super::config::{ConsumerConfig, Recovery};
use super::super::handle::ConsumerHandle;
use super::super::settlement::Failure;
use super::super::state::ConsumerState;
use super::fake::{ack, kind, FakeSink, Op, Script};
use crate::amqp::topology::{ExtraArguments, QueueType, Topology};
use crate::error::{Error, ErrorKind};
use crate::retry::{parse_delays, ParkReason, Route, Thrown};

fn config(max_attempts: Option<u32>) -> ConsumerConfig {
    ConsumerConfig {
        topology: Topology {
            queue: "q".into(),
            exchange: None,
            exchange_type: "topic".into(),
            routing_key: "q".into(),
            more_routing_keys: Vec::new(),
            queue_type: QueueType::Classic,
            delays: parse_delays(&["5s".into()]).unwrap(),
            delivery_limit: None,
            broker_delay: None,
            assert_queue: true,
            extra: ExtraArguments::default(),
            faults_exchange: None,
        },
        prefetch: 10,
        recovery: Recovery {
            max_attempts,
            ..Recovery::default()
        },
        table: None,
        consumer_timeout_ms: None,
        consumer_tag: None,
        full_retry_headers: false,
        watch_moves: false,
    }
}

fn failure(message: &str) -> Failure {
    Failure {
        name: "Error".into(),
        message: message.into(),
        thrown: Some(Thrown::Retryable),
        ..Failure::default()
    }
}

/// Lets the task run until `done` holds (on the paused clock: at most 60 s).
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..60_000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("gave up waiting for {what}");
}

async fn started(script: &Script, max_attempts: Option<u32>) -> (ConsumerHandle, FakeSink) {
    let handle = ConsumerHandle::start_on(script.clone(), config(max_attempts))
        .await
        .unwrap();
    (handle, FakeSink::default())
}

/// A consumer whose sink has deliveries 1 and 2 (tags 1 and 2).
async fn handling_two(script: &Script) -> (ConsumerHandle, FakeSink) {
    let (handle, sink) = started(script, None).await;
    handle.attach(Box::new(sink.clone())).unwrap();
    script.deliver(1);
    script.deliver(2);
    until("two deliveries", || sink.ids().len() == 2).await;
    (handle, sink)
}

#[tokio::test(start_paused = true)]
async fn deliveries_wait_for_the_sink_and_a_settled_run_is_acked_in_one_frame() {
    let script = Script::default();
    let (handle, sink) = started(&script, None).await;
    for tag in 1..=3 {
        script.deliver(tag);
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(sink.batches().is_empty());
    handle.attach(Box::new(sink.clone())).unwrap();
    until("the first batch", || sink.ids().len() == 3).await;
    assert_eq!(sink.batches().len(), 1, "one batch for what arrived before");
    assert_eq!(
        sink.batches()[0].deliveries,
        vec![(1, 1, 0), (2, 2, 0), (3, 3, 0)]
    );

    handle.settle_many(vec![1, 2, 3], Vec::new()).unwrap();
    until("the ack", || !script.ops().is_empty()).await;
    assert_eq!(script.ops(), vec![ack(1, 3, true)]);
}

#[tokio::test(start_paused = true)]
async fn a_failure_is_acked_only_after_its_republish_and_then_with_what_follows() {
    let (script, confirms) = Script::confirming_on_demand();
    let (handle, sink) = handling_two(&script).await;
    handle
        .settle_many(vec![2], vec![(1, failure("carrier 503"))])
        .unwrap();
    // Longer than an ack waits behind a republish: still nothing acked.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(script.ops().is_empty(), "{:?}", script.ops());
    confirms.add_permits(1);
    until("the ack", || !script.ops().is_empty()).await;
    assert_eq!(script.ops(), vec![ack(1, 2, true)]);
    until("the retry event", || sink.events() == vec!["retry"]).await;
}

#[tokio::test(start_paused = true)]
async fn moves_nobody_listens_to_one_by_one_come_as_counts_and_traced_ones_still_one_by_one() {
    let script = Script::default();
    let (handle, sink) = handling_two(&script).await;
    handle.heard(false, false, false).unwrap();
    let traced = Failure {
        trace: Some(Default::default()),
        ..failure("carrier 503")
    };
    handle
        .settle_many(vec![], vec![(1, failure("carrier 503")), (2, traced)])
        .unwrap();
    until("both moves", || sink.events().len() == 2).await;
    let mut events = sink.events();
    events.sort_unstable();
    assert_eq!(
        events,
        vec!["retry", "tally"],
        "the traced move is reported on its own"
    );
    // Heard again: one by one.
    handle.heard(true, true, false).unwrap();
    script.deliver(3);
    until("the third delivery", || sink.ids().len() == 3).await;
    handle
        .settle_many(vec![], vec![(3, failure("carrier 503"))])
        .unwrap();
    until("its move", || sink.events().len() == 3).await;
    assert_eq!(sink.events().last(), Some(&"retry"));
}

#[tokio::test(start_paused = true)]
async fn a_failure_that_asks_to_park_parks_at_once_with_delays_left() {
    let script = Script::default();
    let (handle, sink) = handling_two(&script).await;
    let no_handler = Failure {
        thrown: Some(Thrown::NoHandler),
        ..failure("no handler for pattern 'x'")
    };
    handle
        .settle_many(vec![], vec![(1, no_handler), (2, failure("carrier 503"))])
        .unwrap();
    until("both moves", || sink.events().len() == 2).await;
    let mut events = sink.events();
    events.sort_unstable();
    assert_eq!(events, vec!["parked", "retry"]);
}

#[tokio::test(start_paused = true)]
async fn the_verdict_parks_a_delivery_over_its_limit_before_javascript_and_routes_each_failure() {
    let script = Script::default();
    let mut quorum = config(None);
    quorum.topology.delivery_limit = Some(3);
    let handle = ConsumerHandle::start_on(script.clone(), quorum)
        .await
        .unwrap();
    let sink = FakeSink::default();
    handle.attach(Box::new(sink.clone())).unwrap();
    script.deliver_counted(1, 3);
    script.deliver_counted(2, 2);
    script.deliver(3);
    // A producer's x-delivery-count on a first delivery is not the broker's.
    script.deliver_with_count(4, 99, false);
    until("three deliveries", || sink.ids().len() == 3).await;
    assert_eq!(
        sink.ids(),
        vec![2, 3, 4],
        "the first never reaches JavaScript"
    );
    let not_retryable = Failure {
        thrown: Some(Thrown::NonRetryable),
        ..failure("bad input")
    };
    handle
        .settle_many(
            vec![],
            vec![(2, failure("carrier 503")), (3, not_retryable)],
        )
        .unwrap();
    until("three moves", || sink.events().len() == 3).await;
    let park = |reason| Route::Park { reason, attempt: 0 };
    let delay = parse_delays(&["5s".into()]).unwrap()[0];
    assert_eq!(
        script.routes(),
        vec![
            (1, park(ParkReason::DeliveryLimit)),
            (
                2,
                Route::Retry {
                    delay,
                    index: 0,
                    next_attempt: 1
                }
            ),
            (3, park(ParkReason::NonRetryable)),
        ]
    );
    until("the acks", || script.ops().contains(&ack(1, 3, true))).await;
}

#[tokio::test(start_paused = true)]
async fn recovery_gives_up_on_a_mismatch_and_after_its_attempts() {
    for (error, max_attempts, tries) in [
        (ErrorKind::TopologyMismatch, None, 1),
        (ErrorKind::Connection, Some(3), 3),
    ] {
        let script = Script::default();
        for _ in 0..5 {
            script
                .subscribe_errors
                .lock()
                .unwrap()
                .push_back(Error::new(error, "no"));
        }
        let (handle, sink) = started(&script, max_attempts).await;
        handle.attach(Box::new(sink.clone())).unwrap();
        script.cancel_from_broker();
        until("giving up", || sink.batches().iter().any(|b| b.closed)).await;
        assert_eq!(sink.events(), vec!["disconnected", "error"], "{error:?}");
        assert_eq!(handle.state(), ConsumerState::Closed);
        assert_eq!(
            script.subscribe_errors.lock().unwrap().len(),
            5 - tries,
            "{error:?}: tries"
        );
        assert!(sink.batches().last().unwrap().closed);
    }
}

#[tokio::test(start_paused = true)]
async fn a_failed_republish_holds_its_delivery_until_the_channel_gives_it_back() {
    let script = Script::default();
    script.refuse_republish.store(true, Ordering::SeqCst);
    let (handle, sink) = handling_two(&script).await;
    handle
        .settle_many(vec![2], vec![(1, failure("carrier 503"))])
        .unwrap();
    until("the refusal", || sink.events().contains(&"publish-failed")).await;
    script.refuse_republish.store(false, Ordering::SeqCst);
    // Tag 2 is acked alone: a multiple ack would cover the held tag 1.
    until("the ack of 2", || !script.ops().is_empty()).await;
    assert_eq!(script.ops()[0], ack(1, 2, false));
    // Idle for a while: the channel closes so the broker redelivers tag 1.
    until("the release", || sink.events().contains(&"recovered")).await;
    assert_eq!(script.ops(), vec![ack(1, 2, false), Op::Close { ch: 1 }]);
    assert_eq!(
        sink.events(),
        vec!["publish-failed", "disconnected", "recovered"]
    );
}

#[tokio::test(start_paused = true)]
async fn stop_cancels_and_gives_back_what_javascript_never_got() {
    let script = Script::default();
    let (handle, sink) = started(&script, None).await;
    script.deliver(1);
    script.deliver(2);
    tokio::time::sleep(Duration::from_millis(5)).await;
    handle.stop().await.unwrap();
    assert_eq!(
        script.ops(),
        vec![
            Op::Cancel { ch: 1 },
            Op::Requeue { ch: 1, tag: 1 },
            Op::Requeue { ch: 1, tag: 2 }
        ]
    );
    // A sink attached after the stop gets nothing.
    handle.attach(Box::new(sink.clone())).unwrap();
    let late = handle.finish().await.unwrap();
    assert!(late.is_empty());
    assert!(sink.batches().is_empty());
    assert_eq!(script.ops().last(), Some(&Op::Close { ch: 1 }));
    assert_eq!(handle.state(), ConsumerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn finish_waits_for_republishes_acks_them_then_closes_and_returns_their_events() {
    let (script, confirms) = Script::confirming_on_demand();
    let (handle, sink) = handling_two(&script).await;
    handle
        .settle_many(vec![2], vec![(1, failure("carrier 503"))])
        .unwrap();
    handle.stop().await.unwrap();
    let last = sink.batches().last().cloned().unwrap();
    assert!(last.closed, "the stop ends the deliveries");
    // The stop waited for the cancel longer than an ack waits behind a
    // republish: tag 2 went alone, tag 1 still waits for its confirm.
    let two = ack(1, 2, false);
    assert_eq!(script.ops(), vec![Op::Cancel { ch: 1 }, two.clone()]);

    let handle = Arc::new(handle);
    let finishing = tokio::spawn({
        let handle = handle.clone();
        async move { handle.finish().await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!finishing.is_finished(), "finish waits for the republish");
    confirms.add_permits(1);
    let late = finishing.await.unwrap();
    assert_eq!(late.iter().map(kind).collect::<Vec<_>>(), vec!["retry"]);
    assert_eq!(
        script.ops(),
        vec![
            Op::Cancel { ch: 1 },
            two,
            ack(1, 1, false),
            Op::Close { ch: 1 }
        ]
    );
    assert_eq!(handle.state(), ConsumerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn a_pause_cancels_and_keeps_the_channel_for_what_is_in_flight() {
    let script = Script::default();
    let (handle, sink) = handling_two(&script).await;
    script.deliver(3);
    until("the third delivery", || sink.ids().len() == 3).await;
    handle.pause().await.unwrap();
    assert_eq!(script.ops(), vec![Op::Cancel { ch: 1 }]);
    // JavaScript never started 3: it goes back in its place; 1 and 2 finish
    // and are acked on the same channel.
    handle.release(vec![3]).unwrap();
    handle.settle_many(vec![1, 2], Vec::new()).unwrap();
    until("the ack", || script.ops().len() == 3).await;
    assert_eq!(
        script.ops(),
        vec![
            Op::Cancel { ch: 1 },
            Op::Requeue { ch: 1, tag: 3 },
            ack(1, 2, true)
        ]
    );
    assert_eq!(script.subscriptions(), 1);
    assert_eq!(handle.state(), ConsumerState::Connected);
}

#[tokio::test(start_paused = true)]
async fn a_probe_takes_one_message_while_paused_and_a_resume_consumes_again() {
    let script = Script::default();
    let (handle, sink) = started(&script, None).await;
    handle.attach(Box::new(sink.clone())).unwrap();
    // Not paused: no probe.
    let probe = FakeSink::default();
    let refused = handle.probe(Box::new(probe.clone())).await.unwrap_err();
    assert_eq!(refused.kind, ErrorKind::InvalidOptions);

    handle.pause().await.unwrap();
    assert_eq!(
        handle.probe(Box::new(probe.clone())).await.unwrap(),
        ProbeOutcome::Empty
    );
    script.ready(1);
    assert_eq!(
        handle.probe(Box::new(probe.clone())).await.unwrap(),
        ProbeOutcome::Taken
    );
    assert_eq!(probe.batches()[0].deliveries, vec![(1, 1, 0)]);
    assert!(sink.batches().is_empty(), "the probe goes to its own sink");
    handle.settle_many(vec![1], Vec::new()).unwrap();
    until("the probe's ack", || {
        script.ops().contains(&ack(1, 1, false))
    })
    .await;

    handle.resume().await.unwrap();
    script.deliver(2);
    until("a delivery after the resume", || sink.ids() == vec![2]).await;
    assert_eq!(
        script.ops(),
        vec![
            Op::Cancel { ch: 1 },
            Op::Get { ch: 1 },
            Op::Get { ch: 1 },
            ack(1, 1, false),
            Op::Consume { ch: 1 }
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_consumer_paused_while_recovering_does_not_consume_once_recovered() {
    let script = Script::resubscribing_after_one_refusal();
    let (handle, sink) = handling_two(&script).await;
    script.lose_channel();
    until("recovering", || handle.state() == ConsumerState::Recovering).await;
    handle.pause().await.unwrap();
    until("recovered", || script.subscriptions() == 2).await;
    until("the cancel", || {
        script.ops().contains(&Op::Cancel { ch: 2 })
    })
    .await;
    script.deliver(5);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        sink.ids(),
        vec![1, 2],
        "nothing is handed over while paused"
    );
    handle.resume().await.unwrap();
    assert!(script.ops().contains(&Op::Consume { ch: 2 }));
}

mod broker_delay;
mod channels;
mod watched;
