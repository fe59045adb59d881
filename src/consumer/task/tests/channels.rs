//! A channel lost under the task: the tags of the old one, and the moves
//! that began on it, never settle anything on the new one.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::super::super::state::ConsumerState;
use super::super::fake::{ack, Op, Script};
use super::{failure, handling_two, until};

#[tokio::test(start_paused = true)]
async fn a_lost_channel_recovers_and_its_tags_are_never_acked_on_the_new_one() {
    let script = Script::resubscribing_after_one_refusal();
    let (handle, sink) = handling_two(&script).await;
    script.lose_channel();
    until("the loss", || sink.events().contains(&"disconnected")).await;
    assert_eq!(handle.state(), ConsumerState::Recovering);

    until("recovery", || sink.events().contains(&"recovered")).await;
    assert_eq!(handle.state(), ConsumerState::Connected);
    assert_eq!(
        script.subscriptions(),
        2,
        "one failed try, then a subscription"
    );
    assert_eq!(sink.events(), vec!["disconnected", "recovered"]);

    // The broker redelivers tag 1 on the new channel under a new id; then
    // JavaScript settles the deliveries of the dead channel, whose tags the
    // new channel reuses: nothing may be acked for them.
    script.deliver(1);
    until("the redelivery", || sink.ids().len() == 3).await;
    assert_eq!(sink.ids(), vec![1, 2, 3]);
    handle.settle_many(vec![1, 2], Vec::new()).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(script.ops().is_empty(), "{:?}", script.ops());
    handle.settle_many(vec![3], Vec::new()).unwrap();
    until("the ack", || !script.ops().is_empty()).await;
    assert_eq!(script.ops(), vec![ack(2, 1, false)]);
}

#[tokio::test(start_paused = true)]
async fn a_move_that_outlives_its_channel_settles_nothing_on_the_new_one() {
    for refused in [false, true] {
        let (script, confirms) = Script::confirming_on_demand();
        script.refuse_republish.store(refused, Ordering::SeqCst);
        let (handle, sink) = handling_two(&script).await;
        // Delivery 1 (tag 1) fails; its republish waits for the broker
        // while the channel is lost and a new one consumes.
        handle
            .settle_many(vec![], vec![(1, failure("carrier 503"))])
            .unwrap();
        until("the move", || script.routes().len() == 1).await;
        script.lose_channel();
        until("recovery", || sink.events().contains(&"recovered")).await;
        // The new channel's tag 1 is another message, its handler running.
        script.deliver(1);
        until("the new delivery", || sink.ids().len() == 3).await;
        confirms.add_permits(1);
        let ended = if refused { "publish-failed" } else { "retry" };
        until("the old move's event", || sink.events().contains(&ended)).await;
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(
            script.ops().is_empty(),
            "the old move acked or released the new channel's tag 1 (refused: {refused}): {:?}",
            script.ops()
        );
        // Settled, the new delivery is acked on its own channel, once.
        handle.settle_many(vec![3], Vec::new()).unwrap();
        until("the ack", || !script.ops().is_empty()).await;
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(script.ops(), vec![ack(2, 1, false)], "refused: {refused}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_move_that_panics_holds_its_delivery_which_goes_back_to_the_broker() {
    let script = Script::default();
    script.panic_on_republish.store(true, Ordering::SeqCst);
    let (handle, sink) = handling_two(&script).await;
    handle
        .settle_many(vec![2], vec![(1, failure("carrier 503"))])
        .unwrap();
    // Delivery 2 is acked alone: the panicked move's delivery is never acked.
    until("the ack of 2", || script.ops().contains(&ack(1, 2, false))).await;
    // Once nothing else is in flight, the held delivery goes back with its channel.
    until("the release", || {
        script.ops().contains(&Op::Close { ch: 1 })
    })
    .await;
    until("recovery", || sink.events().contains(&"recovered")).await;
    assert!(
        !script
            .ops()
            .iter()
            .any(|op| matches!(op, Op::Ack { tag: 1, .. })),
        "{:?}",
        script.ops()
    );
}
