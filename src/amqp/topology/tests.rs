//! The topology's rules and the errors of refused declarations.

use super::mismatch::{needs, quoted_after, Current};
use super::storage::args_as_it_is;
use super::*;

fn topology(queue_type: QueueType) -> Topology {
    Topology {
        queue: "orders".into(),
        exchange: None,
        exchange_type: "topic".into(),
        routing_key: "orders".into(),
        more_routing_keys: Vec::new(),
        queue_type,
        delays: vec![Delay::from_millis(5_000).unwrap()],
        delivery_limit: (queue_type == QueueType::Quorum).then_some(5),
        broker_delay: None,
        assert_queue: true,
        extra: ExtraArguments::default(),
        faults_exchange: None,
    }
}

fn table(pairs: &[(&str, AMQPValue)]) -> FieldTable {
    let mut t = FieldTable::default();
    for (k, v) in pairs {
        t.insert((*k).into(), v.clone());
    }
    t
}

#[test]
fn finds_the_mismatched_argument() {
    let text = "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'q.retry.5s' in vhost '/': received the value '5000' of type 'long' but current is the value '999' of type 'signedint'";
    assert_eq!(
        quoted_after(text, "inequivalent arg '").as_deref(),
        Some("x-message-ttl")
    );
    assert_eq!(
        Current::parse(text),
        Current::Value {
            value: "999".into(),
            kind: "signedint".into()
        }
    );
    let none = "PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue 'q' in vhost '/': received the value '5' of type 'long' but current is none";
    assert_eq!(Current::parse(none), Current::None);
    let durable = "PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'q' in vhost '/': received 'true' but current is 'false'";
    assert_eq!(Current::parse(durable), Current::Plain("false".into()));
    assert!(needs("x-dead-letter-strategy", Role::Work).contains("3.10"));
}

#[test]
fn a_mismatch_names_the_option_that_matches() {
    let t = topology(QueueType::Classic);
    let text = "PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue 'orders' in vhost '/': received none but current is the value '1000' of type 'signedint'";
    let e = t.mismatch(Role::Work, "orders", text);
    assert_eq!(e.kind, ErrorKind::TopologyMismatch);
    assert!(e.message.contains("'x-max-length' = 1000"), "{}", e.message);
    assert!(
        e.message.contains(
            "set queueArguments: { 'x-max-length': 1000 } to match, or assertQueue: false"
        ),
        "{}",
        e.message
    );

    let dlx = "PRECONDITION_FAILED - inequivalent arg 'x-dead-letter-exchange' for queue 'orders' in vhost '/': received none but current is the value 'old-dlx' of type 'longstr'";
    assert!(t
        .mismatch(Role::Work, "orders", dlx)
        .message
        .contains("queueArguments: { 'x-dead-letter-exchange': 'old-dlx' }"));

    let parked = "PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue 'orders.parked' in vhost '/': received the value '10' of type 'long' but current is none";
    assert!(t
        .mismatch(Role::Parked, "orders.parked", parked)
        .message
        .contains("remove 'x-max-length' from parkedQueueArguments"));

    let quorum = "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'orders' in vhost '/': received none but current is the value 'quorum' of type 'longstr'";
    assert!(t
        .mismatch(Role::Work, "orders", quorum)
        .message
        .contains("set queueType: 'quorum' to match"));

    // RabbitMQ 4.x names both types plainly, whichever way round.
    let quorum_4x = "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'orders' in vhost '/': received 'classic' but current is 'quorum'";
    let advice = t.mismatch(Role::Work, "orders", quorum_4x).message;
    assert!(
        advice.contains("set queueType: 'quorum' to match"),
        "{advice}"
    );
    assert!(advice.contains("'x-queue-type' = 'quorum'"), "{advice}");
    let classic_4x = "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'orders' in vhost '/': received 'quorum' but current is 'classic'";
    assert!(topology(QueueType::Quorum)
        .mismatch(Role::Work, "orders", classic_4x)
        .message
        .contains("set queueType: 'classic' to match"));
    let classic_3x = "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'orders' in vhost '/': received the value 'quorum' of type 'longstr' but current is none";
    assert!(topology(QueueType::Quorum)
        .mismatch(Role::Work, "orders", classic_3x)
        .message
        .contains("set queueType: 'classic' to match"));

    let ttl = "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'orders.retry.5s' in vhost '/': received the value '5000' of type 'long' but current is the value '999' of type 'signedint'";
    assert!(t
        .mismatch(Role::Retry, "orders.retry.5s", ttl)
        .message
        .contains("delete it once it is empty"));

    let durable = "PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'orders' in vhost '/': received 'true' but current is 'false'";
    assert!(t
        .mismatch(Role::Work, "orders", durable)
        .message
        .contains("assertQueue: false"));

    let q = topology(QueueType::Quorum);
    let limit = "PRECONDITION_FAILED - inequivalent arg 'x-delivery-limit' for queue 'orders' in vhost '/': received the value '6' of type 'long' but current is the value '21' of type 'long'";
    assert!(q
        .mismatch(Role::Work, "orders", limit)
        .message
        .contains("set deliveryLimit: 20 to match"));
}

#[test]
fn extra_arguments_reach_the_declarations() {
    let mut t = topology(QueueType::Classic);
    t.extra.work = table(&[("x-max-length", AMQPValue::LongLongInt(1000))]);
    t.extra.parked = table(&[("x-queue-mode", long("lazy"))]);
    assert!(t.check().is_ok());
    assert_eq!(
        t.work_args()
            .inner()
            .get(&ShortString::from("x-max-length")),
        Some(&AMQPValue::LongLongInt(1000))
    );
    assert_eq!(
        t.parked_args()
            .inner()
            .get(&ShortString::from("x-queue-mode")),
        Some(&long("lazy"))
    );
    assert!(t
        .retry_args(t.delays[0])
        .inner()
        .get(&ShortString::from("x-max-length"))
        .is_none());
}

#[test]
fn extra_arguments_may_not_take_over_the_library_s_own() {
    let refused =
        |role_args: fn(&mut ExtraArguments) -> &mut FieldTable, key: &str, qt: QueueType| {
            let mut t = topology(qt);
            role_args(&mut t.extra).insert(key.into(), long("x"));
            t.check().expect_err(key).message
        };
    assert!(refused(|e| &mut e.work, "x-queue-type", QueueType::Classic)
        .contains("queueArguments may not set 'x-queue-type': queueType sets it"));
    assert!(
        refused(|e| &mut e.retry, "x-message-ttl", QueueType::Classic).contains("onFailure.delays")
    );
    assert!(refused(
        |e| &mut e.retry,
        "x-dead-letter-exchange",
        QueueType::Classic
    )
    .contains("retryQueueArguments"));
    assert!(
        refused(|e| &mut e.work, "x-dead-letter-exchange", QueueType::Quorum)
            .contains("deliveryLimit")
    );
    assert!(refused(|e| &mut e.parked, "x-expires", QueueType::Classic).contains("x-expires"));
    assert!(
        refused(|e| &mut e.parked, "x-message-ttl", QueueType::Classic).contains("expire unread")
    );
    // A classic work queue's dead-letter exchange is the user's to set.
    let mut t = topology(QueueType::Classic);
    t.extra
        .work
        .insert("x-dead-letter-exchange".into(), long("dlx"));
    assert!(t.check().is_ok());
}

#[test]
fn a_length_limit_on_a_retry_queue_needs_reject_publish() {
    let mut t = topology(QueueType::Classic);
    t.extra
        .retry
        .insert("x-max-length".into(), AMQPValue::LongLongInt(10));
    assert!(t
        .check()
        .unwrap_err()
        .message
        .contains("'x-overflow': 'reject-publish'"));
    t.extra
        .retry
        .insert("x-overflow".into(), long("reject-publish"));
    assert!(t.check().is_ok());
}

#[test]
fn broker_delay_sets_the_work_queue_and_no_retry_queue() {
    let mut q = topology(QueueType::Quorum);
    q.delays.clear();
    q.delivery_limit = Some(4);
    q.broker_delay = Some(BrokerDelay::parse("200ms", "1m", 3).unwrap());
    let args = q.work_args();
    let get = |k: &str| args.inner().get(&ShortString::from(k)).cloned();
    assert_eq!(get("x-delayed-retry-type"), Some(long("failed")));
    assert_eq!(
        get("x-delayed-retry-min"),
        Some(AMQPValue::LongLongInt(200))
    );
    assert_eq!(
        get("x-delayed-retry-max"),
        Some(AMQPValue::LongLongInt(60_000))
    );
    assert_eq!(get("x-delivery-limit"), Some(AMQPValue::LongLongInt(5)));
    let names: Vec<String> = q.queues(&[]).into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["orders", "orders.parked"]);

    q.extra.work = table(&[("x-delayed-retry-min", AMQPValue::LongLongInt(1))]);
    assert!(q
        .check()
        .unwrap_err()
        .message
        .contains("onFailure.brokerDelay sets it"));
    q.extra.work = FieldTable::default();

    let min = "PRECONDITION_FAILED - inequivalent arg 'x-delayed-retry-min' for queue 'orders' in vhost '/': received '200' but current is '500'";
    assert!(q
        .mismatch(Role::Work, "orders", min)
        .message
        .contains("set onFailure.brokerDelay.min: 500 (milliseconds) to match"));
    let none = "PRECONDITION_FAILED - inequivalent arg 'x-delayed-retry-type' for queue 'orders' in vhost '/': received the value 'failed' of type 'longstr' but current is none";
    assert!(q
        .mismatch(Role::Work, "orders", none)
        .message
        .contains("declare the queue anew"));
}

#[test]
fn retry_queues_choose_their_storage_where_the_broker_lets_them() {
    let classic = topology(QueueType::Classic);
    let keys = |v: Option<&str>| -> Vec<&str> {
        classic
            .retry_storage(v)
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    };
    assert_eq!(keys(Some("3.10.8")), ["x-queue-version", "x-queue-mode"]);
    assert_eq!(keys(Some("3.11.28")), ["x-queue-version", "x-queue-mode"]);
    assert_eq!(keys(Some("3.13.7")), ["x-queue-version"]);
    assert!(keys(Some("4.3.6")).is_empty());
    assert!(keys(None).is_empty());
    assert!(topology(QueueType::Quorum)
        .retry_storage(Some("3.10.8"))
        .is_empty());
    let mut chosen = topology(QueueType::Classic);
    chosen.extra.retry = table(&[("x-queue-version", AMQPValue::LongLongInt(1))]);
    let by_options: Vec<&str> = chosen
        .retry_storage(Some("3.10.8"))
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(by_options, ["x-queue-mode"]);

    let specs = classic.queues(&classic.retry_storage(Some("3.10.8")));
    let arg = |s: &QueueSpec, k: &str| s.args.inner().get(k).cloned();
    assert_eq!(
        arg(&specs[1], "x-queue-version"),
        Some(AMQPValue::LongLongInt(2))
    );
    assert_eq!(
        arg(&specs[1], "x-queue-mode"),
        Some(AMQPValue::LongString(LongString::from("lazy")))
    );
    assert_eq!(specs[1].adopts, ["x-queue-version", "x-queue-mode"]);
    for (s, role) in [
        (&specs[0], "the work queue is the user's"),
        (&specs[2], "parked"),
    ] {
        assert_eq!(arg(s, "x-queue-version"), None, "{role}");
        assert_eq!(arg(s, "x-queue-mode"), None, "{role}");
        assert!(s.adopts.is_empty(), "{role}");
    }
    // Where nothing is chosen, a retry queue still keeps what it has.
    let plain = classic.queues(&[]);
    assert!(plain.iter().all(|s| arg(s, "x-queue-version").is_none()));
    assert_eq!(plain[1].adopts, ["x-queue-version", "x-queue-mode"]);
    assert_eq!(chosen.queues(&[])[1].adopts, ["x-queue-mode"]);
    assert!(topology(QueueType::Quorum).queues(&[])[1].adopts.is_empty());
}

#[test]
fn a_retry_queue_that_exists_keeps_its_version_and_mode() {
    let classic = topology(QueueType::Classic);
    let specs = classic.queues(&classic.retry_storage(Some("3.10.8")));
    let retry = &specs[1];
    let none = "PRECONDITION_FAILED - inequivalent arg 'x-queue-version' for queue 'orders.retry.5s' in vhost '/': received the value '2' of type 'long' but current is none";
    let args = args_as_it_is(retry, &retry.args, none).unwrap();
    assert!(!args.contains_key("x-queue-version"));
    assert!(args.contains_key("x-message-ttl"));
    assert!(
        args.contains_key("x-queue-mode"),
        "only the refused one changes"
    );
    // What the queue is declared with once `text` refused `spec`'s arguments.
    let kept = |spec: &QueueSpec, text: &str, key: &str| {
        let args = args_as_it_is(spec, &spec.args, text).expect("kept as it is");
        args.inner().get(key).cloned()
    };
    let text = |s: &str| Some(AMQPValue::LongString(LongString::from(s)));
    let one = "PRECONDITION_FAILED - inequivalent arg 'x-queue-version' for queue 'orders.retry.5s' in vhost '/': received '2' but current is '1'";
    assert_eq!(
        kept(retry, one, "x-queue-version"),
        Some(AMQPValue::LongLongInt(1))
    );
    // One after the other, as the broker refuses them.
    let mode = "PRECONDITION_FAILED - inequivalent arg 'x-queue-mode' for queue 'orders.retry.5s' in vhost '/': received 'lazy' but current is 'default'";
    let both = args_as_it_is(retry, &args, mode).unwrap();
    assert!(!both.contains_key("x-queue-version"));
    assert_eq!(both.inner().get("x-queue-mode").cloned(), text("default"));
    // Left by RabbitMQ 3.11 and met on 4.3, where nothing is chosen: kept.
    let plain = &classic.queues(&[])[1];
    let lazy = "PRECONDITION_FAILED - inequivalent arg 'x-queue-mode' for queue 'orders.retry.5s' in vhost '/': received none but current is the value 'lazy' of type 'longstr'";
    assert_eq!(kept(plain, lazy, "x-queue-mode"), text("lazy"));
    let v2 = "PRECONDITION_FAILED - inequivalent arg 'x-queue-version' for queue 'orders.retry.5s' in vhost '/': received none but current is the value '2' of type 'byte'";
    assert_eq!(
        kept(plain, v2, "x-queue-version"),
        Some(AMQPValue::LongLongInt(2))
    );
    // Any other difference is a mismatch, and so is a version the options chose.
    let ttl = "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue 'orders.retry.5s' in vhost '/': received the value '5000' of type 'long' but current is the value '999' of type 'signedint'";
    assert!(args_as_it_is(retry, &retry.args, ttl).is_none());
    let mut chosen = topology(QueueType::Classic);
    chosen.extra.retry = table(&[("x-queue-version", AMQPValue::LongLongInt(1))]);
    let by_options = &chosen.queues(&[])[1];
    assert!(args_as_it_is(by_options, &by_options.args, none).is_none());
    assert!(
        args_as_it_is(&specs[0], &specs[0].args, lazy).is_none(),
        "the work queue"
    );
}
