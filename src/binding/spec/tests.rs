//! The rules and defaults of `consume`, without a broker.

use std::time::Duration;

use super::{consume_defaults, ConsumeOptions, ConsumeSpec};
use crate::amqp::topology::QueueType;

fn options(queue: &str) -> ConsumeOptions {
    ConsumeOptions {
        queue: queue.into(),
        exchange: None,
        exchange_type: None,
        routing_key: None,
        more_routing_keys: None,
        prefetch: None,
        queue_type: None,
        delays: vec!["5s".into(), "1m".into()],
        delivery_limit: None,
        broker_delay_min: None,
        broker_delay_max: None,
        broker_delay_attempts: None,
        consumer_timeout_ms: None,
        recovery_initial_delay_ms: None,
        recovery_max_delay_ms: None,
        recovery_max_attempts: None,
        recovery_step_timeout_ms: None,
        table: None,
        table_max_attempts: None,
        assert_queue: None,
        queue_arguments: None,
        retry_queue_arguments: None,
        parked_queue_arguments: None,
        consumer_tag: None,
        full_retry_headers: None,
        watch_moves: None,
        faults_exchange: None,
    }
}

fn with(change: impl FnOnce(&mut ConsumeOptions)) -> ConsumeOptions {
    let mut o = options("orders");
    change(&mut o);
    o
}

/// The whole message a refused option gives JavaScript.
fn refused(o: ConsumeOptions) -> String {
    ConsumeSpec::validate(o).unwrap_err().reason
}

fn invalid(message: &str) -> String {
    format!("[INVALID_OPTIONS] {message}")
}

#[test]
fn defaults_are_applied_and_exported() {
    let d = consume_defaults();
    let spec = ConsumeSpec::validate(options("orders")).unwrap();
    assert_eq!(spec.prefetch, 10);
    assert_eq!(u32::from(spec.prefetch), d.prefetch);
    assert_eq!(spec.topology.queue_type, QueueType::Classic);
    assert_eq!(spec.topology.exchange_type, "topic");
    assert_eq!(spec.topology.routing_key, "orders");
    assert_eq!(spec.topology.delivery_limit, None);
    assert!(spec.topology.assert_queue);
    assert_eq!(spec.topology.delays.len(), 2);
    assert_eq!(spec.table_max_attempts, None);
    let r = spec.recovery;
    assert_eq!(r.backoff.initial, Duration::from_millis(500));
    assert_eq!(r.backoff.max, Duration::from_millis(30_000));
    assert_eq!(r.step_timeout, Duration::from_millis(15_000));
    assert_eq!(r.max_attempts, None);
    assert_eq!(
        (
            d.recovery_initial_delay_ms,
            d.recovery_max_delay_ms,
            d.recovery_step_timeout_ms
        ),
        (500, 30_000, 15_000)
    );

    let quorum = ConsumeSpec::validate(with(|o| o.queue_type = Some("quorum".into()))).unwrap();
    assert_eq!(quorum.topology.delivery_limit, Some(5));
    assert_eq!(d.delivery_limit, 5);
    assert_eq!(spec_timeout(&quorum), Some(2_147_483_647));
    assert_eq!(d.consumer_timeout_ms, 2_147_483_647);

    let table = ConsumeSpec::validate(with(|o| o.table = Some(true))).unwrap();
    assert_eq!(table.table_max_attempts, Some(10));
    assert_eq!(d.table_max_attempts, 10);
}

#[test]
fn given_values_are_kept() {
    let spec = ConsumeSpec::validate(with(|o| {
        o.prefetch = Some(65_535);
        o.queue_type = Some("quorum".into());
        o.exchange = Some("shop".into());
        o.exchange_type = Some("headers".into());
        o.routing_key = Some(String::new());
        o.delivery_limit = Some(u32::MAX - 1);
        o.recovery_initial_delay_ms = Some(1);
        o.recovery_max_delay_ms = Some(u32::MAX);
        o.recovery_step_timeout_ms = Some(250);
        o.recovery_max_attempts = Some(3);
        o.table = Some(true);
        o.table_max_attempts = Some(1);
        o.assert_queue = Some(false);
    }))
    .unwrap();
    assert_eq!(spec.prefetch, 65_535);
    assert_eq!(spec.topology.queue_type, QueueType::Quorum);
    assert_eq!(spec.topology.exchange.as_deref(), Some("shop"));
    assert_eq!(spec.topology.exchange_type, "headers");
    assert_eq!(spec.topology.routing_key, "");
    assert_eq!(spec.topology.delivery_limit, Some(u32::MAX - 1));
    assert!(!spec.topology.assert_queue);
    assert_eq!(spec.recovery.backoff.initial, Duration::from_millis(1));
    assert_eq!(
        spec.recovery.backoff.max,
        Duration::from_millis(u64::from(u32::MAX))
    );
    assert_eq!(spec.recovery.step_timeout, Duration::from_millis(250));
    assert_eq!(spec.recovery.max_attempts, Some(3));
    assert_eq!(spec.table_max_attempts, Some(1));
    assert_eq!(
        ConsumeSpec::validate(with(|o| o.prefetch = Some(1)))
            .unwrap()
            .prefetch,
        1
    );
    for t in ["topic", "direct", "fanout", "headers"] {
        let spec = ConsumeSpec::validate(with(|o| o.exchange_type = Some(t.into()))).unwrap();
        assert_eq!(spec.topology.exchange_type, t);
    }
}

fn spec_timeout(spec: &ConsumeSpec) -> Option<u32> {
    spec.consumer_timeout_ms
}

#[test]
fn consumer_timeout_is_for_quorum_queues_only() {
    let classic = ConsumeSpec::validate(options("orders")).unwrap();
    assert_eq!(spec_timeout(&classic), None);
    let quorum = |ms| {
        with(|o| {
            o.queue_type = Some("quorum".into());
            o.consumer_timeout_ms = ms;
        })
    };
    assert_eq!(
        spec_timeout(&ConsumeSpec::validate(quorum(Some(60_000))).unwrap()),
        Some(60_000)
    );
    assert_eq!(
        refused(quorum(Some(0))),
        invalid("consumerTimeoutMs must be a whole number of milliseconds of at least 1, got 0")
    );
    assert!(refused(with(|o| o.consumer_timeout_ms = Some(60_000)))
        .starts_with("[INVALID_OPTIONS] consumerTimeoutMs needs queueType 'quorum'"));
}

#[test]
fn prefetch_is_from_1_to_65535() {
    for n in [0, 65_536, u32::MAX] {
        assert_eq!(
            refused(with(|o| o.prefetch = Some(n))),
            invalid(&format!(
                "prefetch must be a whole number from 1 to 65535, got {n}"
            ))
        );
    }
}

#[test]
fn queue_and_exchange_types_are_known_ones_and_not_echoed() {
    let m = refused(with(|o| o.queue_type = Some("secret-stream".into())));
    assert_eq!(
        m,
        invalid("queueType must be 'classic' or 'quorum', got another string")
    );
    let m = refused(with(|o| o.exchange_type = Some("x-secret".into())));
    assert_eq!(
        m,
        invalid(
            "exchangeType must be 'topic', 'direct', 'fanout' or 'headers', got another string"
        )
    );
}

#[test]
fn delivery_limit_is_at_least_1_and_needs_a_quorum_queue() {
    for (queue_type, n) in [(Some("quorum"), 0), (None, 0), (Some("quorum"), u32::MAX)] {
        assert_eq!(
            refused(with(|o| {
                o.queue_type = queue_type.map(Into::into);
                o.delivery_limit = Some(n);
            })),
            invalid(&format!(
                "deliveryLimit must be a whole number of at least 1, got {n}"
            ))
        );
    }
    let classic =
        invalid("deliveryLimit needs queueType 'quorum': classic queues do not count deliveries");
    assert_eq!(refused(with(|o| o.delivery_limit = Some(3))), classic);
    assert_eq!(
        refused(with(|o| {
            o.queue_type = Some("classic".into());
            o.delivery_limit = Some(3);
        })),
        classic
    );
}

#[test]
fn recovery_waits_and_tries_are_at_least_1() {
    type Set = fn(&mut ConsumeOptions);
    let cases: [(&str, Set); 3] = [
        ("recovery.initialDelayMs", |o| {
            o.recovery_initial_delay_ms = Some(0)
        }),
        ("recovery.maxDelayMs", |o| o.recovery_max_delay_ms = Some(0)),
        ("recovery.stepTimeoutMs", |o| {
            o.recovery_step_timeout_ms = Some(0)
        }),
    ];
    for (option, set) in cases {
        assert_eq!(
            refused(with(set)),
            invalid(&format!(
                "{option} must be a whole number of milliseconds, got 0"
            ))
        );
    }
    assert_eq!(
        refused(with(|o| o.recovery_max_attempts = Some(0))),
        invalid("recovery.maxAttempts must be a whole number of at least 1, or Infinity, got 0")
    );
}

#[test]
fn table_attempts_are_at_least_1_and_need_the_table() {
    assert_eq!(
        refused(with(|o| {
            o.table = Some(true);
            o.table_max_attempts = Some(0);
        })),
        invalid("onFailure.table.maxAttempts must be a whole number of at least 1, got 0")
    );
    assert_eq!(
        refused(with(|o| o.table_max_attempts = Some(3))),
        invalid("onFailure.table.maxAttempts needs onFailure.table")
    );
    let spec = ConsumeSpec::validate(with(|o| o.table = Some(true))).unwrap();
    assert_eq!(
        spec.into_config(None).unwrap_err().reason,
        invalid("onFailure.table needs a retry table: connect with { retryTable: { url: 'postgres://…' } }")
    );
    let config = ConsumeSpec::validate(options("orders"))
        .unwrap()
        .into_config(None)
        .unwrap();
    assert!(config.table.is_none());
    assert_eq!(config.prefetch, 10);
}

#[test]
fn delays_names_and_arguments_are_checked() {
    assert!(refused(with(|o| o.delays = vec!["1m".into(), "5s".into()]))
        .starts_with("[INVALID_OPTIONS] onFailure.delays: "));
    assert!(refused(options(&"q".repeat(250))).starts_with("[INVALID_OPTIONS] queue: "));
    assert!(refused(with(|o| o.exchange = Some("e".repeat(256))))
        .starts_with("[INVALID_OPTIONS] exchange: "));
    assert!(refused(with(|o| o.routing_key = Some("k".repeat(256))))
        .starts_with("[INVALID_OPTIONS] routingKey: "));
    assert_eq!(
        refused(with(|o| o.queue_arguments = Some("[1]".into()))),
        invalid("queueArguments must be an object of argument names to values")
    );
    assert_eq!(
        refused(with(
            |o| o.parked_queue_arguments = Some(r#"{"x-a":null}"#.into())
        )),
        invalid("parkedQueueArguments['x-a'] must be a string, a number or a boolean")
    );
    assert_eq!(
        refused(with(|o| o.retry_queue_arguments = Some(r#"{"x-message-ttl":5}"#.into()))),
        invalid("retryQueueArguments may not set 'x-message-ttl': onFailure.delays (a retry queue's TTL is its delay) sets it")
    );
}

#[test]
fn the_option_rules_come_before_the_delays_and_names() {
    // As when TypeScript checked these options before the delays reached the native layer.
    let m = refused(with(|o| {
        o.prefetch = Some(0);
        o.delays = vec!["1m".into(), "5s".into()];
        o.queue = "q".repeat(300);
    }));
    assert!(m.starts_with("[INVALID_OPTIONS] prefetch "), "{m}");
    let m = refused(with(|o| {
        o.delivery_limit = Some(3);
        o.recovery_initial_delay_ms = Some(0);
    }));
    assert!(
        m.starts_with("[INVALID_OPTIONS] deliveryLimit needs"),
        "{m}"
    );
}

#[test]
fn broker_delay_is_one_choice_on_a_quorum_queue() {
    let bd = |o: &mut ConsumeOptions| {
        o.delays.clear();
        o.queue_type = Some("quorum".into());
        o.broker_delay_min = Some("200ms".into());
        o.broker_delay_max = Some("1m".into());
        o.broker_delay_attempts = Some(3);
    };
    let spec = ConsumeSpec::validate(with(bd)).unwrap();
    let b = spec.topology.broker_delay.unwrap();
    assert_eq!(
        (b.min.millis(), b.max.millis(), b.attempts),
        (200, 60_000, 3)
    );
    assert_eq!(spec.topology.delivery_limit, Some(4));
    assert!(spec.topology.delays.is_empty());
    let spec = ConsumeSpec::validate(with(|o| {
        bd(o);
        o.delivery_limit = Some(10);
    }))
    .unwrap();
    assert_eq!(spec.topology.delivery_limit, Some(10));

    let both = refused(with(|o| {
        bd(o);
        o.delays = vec!["5s".into()];
    }));
    assert!(both.starts_with("[INVALID_OPTIONS] onFailure.delays and onFailure.brokerDelay are two ways to retry: use one"), "{both}");
    let classic = refused(with(|o| {
        bd(o);
        o.queue_type = None;
    }));
    assert!(
        classic.contains("onFailure.brokerDelay needs queueType 'quorum'"),
        "{classic}"
    );
    assert!(
        classic.contains("use onFailure.delays on a classic queue"),
        "{classic}"
    );
    assert!(refused(with(|o| {
        bd(o);
        o.table = Some(true);
    }))
    .contains("cannot be followed by onFailure.table"));
    assert!(refused(with(|o| {
        bd(o);
        o.broker_delay_attempts = None;
    }))
    .contains("needs min, max and attempts"));
    assert!(refused(with(|o| {
        bd(o);
        o.broker_delay_min = Some("2m".into());
    }))
    .contains("onFailure.brokerDelay.min (2m) must not be longer than max (1m)"));
    assert!(refused(with(|o| {
        bd(o);
        o.delivery_limit = Some(3);
    }))
    .contains("deliveryLimit (3) must be above onFailure.brokerDelay.attempts (3)"));
}

#[test]
fn a_consumer_tag_is_a_short_string() {
    assert!(refused(with(|o| o.consumer_tag = Some(String::new()))).contains("consumerTag"));
    assert!(refused(with(|o| o.consumer_tag = Some("t".repeat(256)))).contains("consumerTag"));
    assert!(ConsumeSpec::validate(with(|o| o.consumer_tag = Some("orders-1".into()))).is_ok());
}
