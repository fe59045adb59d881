//! A failed delivery's way out: the confirmed republish to its retry or
//! parked queue, or a row in the retry table, with the headers that say why.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lapin::types::{short_string_wire_bytes, AMQPValue, FieldTable, LongString, ShortString};
use lapin::BasicProperties;

use super::config::ConsumerConfig;
use super::event::Event;
use super::facts::{facts, policy};
use super::fault;
use super::limits::BROKER_HEADROOM;
use super::pending::Pending;
use super::settlement::Failure;
use super::steps::declare;
use crate::amqp::connection::Broker;
use crate::amqp::fields::{
    encoded_size, header_str, now_ms, properties_size, with_trace, CONTENT_HEADER_OVERHEAD,
};
use crate::amqp::publisher::republish_properties;
use crate::error::{Error, ErrorKind};
use crate::retry::headers::{
    cut_utf8, MAX_ERROR_MESSAGE_BYTES, RETRY_FIRST_FAILED_AT, RETRY_ORIGINAL_EXCHANGE,
    RETRY_ORIGINAL_ROUTING_KEY,
};
use crate::retry::time::{iso8601_utc, parse_iso8601_utc};
use crate::retry::{
    copy_headers, is_broker_death_header, is_own_header, is_routing_header, parked_queue_name,
    retry_queue_name, verdict, Delay, Facts, FailureInput, HeaderValue, ProducerHeader, Route,
    Verdict, RETRY_DROPPED_HEADERS,
};
use crate::table::store::{NewRow, Stored};

/// Routes a failed delivery: confirmed publish to its retry or parked queue,
/// or a row in the retry table, then tell the task, which acks it through
/// the ledger. On a failed publish (or a database that cannot be reached)
/// the delivery is held: never acked. A message the retry table refuses for
/// what it holds parks instead (`table-refused`): held, it would come back
/// and be refused again.
///
/// Takes what it works with by value, so that a task can box it as it is:
/// a wrapping future would hold the delivery, the failure and every
/// argument a second time, and be copied into its box on every failure.
///
/// Speed: with the rare steps boxed where they run, the future is 4,600
/// bytes where it was 7,864. Bought: the failure path's client CPU 0.386
/// -> 0.375 s per 10k (0.97x) on `../shared/bench/pinned.sh`'s workload, 5
/// alternating rounds (docs/performance.md, "A smaller future for every
/// failure").
pub(super) async fn handle_failure(
    broker: Arc<Broker>,
    config: Arc<ConsumerConfig>,
    id: u64,
    p: Pending,
    f: Failure,
    route: Route,
) -> Event {
    let topo = &config.topology;
    let props = &p.delivery.properties;
    let message_id = props.message_id().as_ref().map(lossy);
    if let Route::Return { delay, .. } = route {
        // The task returns such a delivery on its channel; never republished.
        return Event::PublishFailed {
            id,
            message_id,
            target: topo.queue.clone(),
            error: Error::new(
                ErrorKind::PublishFailed,
                format!("a return to the broker ({delay}) is not a republish"),
            ),
        };
    }
    let (route, properties) = republished(
        broker.user(),
        broker.frame_max().await,
        &config,
        &p,
        &f,
        route,
    );
    let target = match &route {
        Route::Retry { delay, .. } => retry_queue_name(&topo.queue, *delay),
        Route::Return { .. } => topo.queue.clone(),
        Route::Table { .. } => "the retry table".to_owned(),
        Route::Park { .. } => parked_queue_name(&topo.queue),
    };
    let original = props.headers().as_ref();
    let first = header_str(original, RETRY_FIRST_FAILED_AT);
    // Made before the copy goes: its headers say when the message first failed, and where it came from.
    let fault = match (&route, &topo.faults_exchange) {
        (Route::Park { reason, attempt }, Some(_)) => Some(fault::Fault::of(
            &topo.queue,
            props,
            message_id.as_deref(),
            &properties,
            (reason.as_str(), *attempt),
            fault::FaultError {
                name: &f.name,
                message: &f.message,
            },
        )),
        _ => None,
    };
    let mut row_id = None;
    let mut refused = None;
    let stored = match (&route, &config.table, &f.table) {
        (Route::Table { next_attempt }, Some(table), Some(t)) => {
            // A row the scheduler could not read back is refused now, not found later.
            match serde_json::to_value(&properties) {
                Err(e) => {
                    refused = Some(format!(
                        "the message's properties cannot be written as JSON: {e}"
                    ));
                    Ok(())
                }
                Ok(stored_properties) => {
                    let row = NewRow {
                        queue: topo.queue.clone(),
                        body: p.delivery.data.clone(),
                        properties: stored_properties,
                        attempt: *next_attempt,
                        next_attempt_at: t.next_attempt_at,
                        dependency: t.dependency.clone(),
                        tenant: t.tenant.clone(),
                        last_error: cut_utf8(&f.message, MAX_ERROR_MESSAGE_BYTES),
                        error_name: f.name.clone(),
                        message_id: message_id.clone(),
                        correlation_id: props
                            .correlation_id()
                            .as_ref()
                            .map(|s| s.as_str().to_owned()),
                        first_failed_at: first
                            .as_deref()
                            .and_then(parse_iso8601_utc)
                            .map(|ms| UNIX_EPOCH + Duration::from_millis(ms))
                            .unwrap_or_else(SystemTime::now),
                    };
                    // Boxed, as the declaration below: a rare step would
                    // otherwise size the future of every failure.
                    match Box::pin(table.store.insert(row)).await {
                        Ok(Stored::Row(id)) => {
                            row_id = Some(id);
                            Ok(())
                        }
                        Ok(Stored::Refused(why)) => {
                            refused = Some(why);
                            Ok(())
                        }
                        Err(e) => Err(e),
                    }
                }
            }
        }
        (Route::Table { .. }, _, _) => Err(Error::new(
            ErrorKind::RetryTable,
            "the route is the retry table but none is configured",
        )),
        _ => {
            let published = broker
                .republish("", &target, &p.delivery.data, properties)
                .await;
            if matches!(&published, Err(e) if e.kind == ErrorKind::Unroutable) {
                // The retry or parked queue is gone (deleted by hand): declare the
                // topology again so the next failures route. This message stays
                // unacked, as every failed republish does.
                let _ = Box::pin(declare(&broker, topo, config.recovery.step_timeout)).await;
            }
            published
        }
    };
    if let Some(why) = refused {
        let mut f = f;
        f.message = format!(
            "the retry table cannot store this message: {why}; the handler's error: {}",
            f.message
        );
        let Some(park) = learning(&config, &p, &f, |facts| facts.table_refused = true) else {
            // Held rather than acked: nothing stored it.
            return Event::PublishFailed {
                id,
                message_id,
                target,
                error: Error::new(ErrorKind::RetryTable, why),
            };
        };
        // A route to the parked queue: this does not come back here.
        return Box::pin(handle_failure(broker, config, id, p, f, park)).await;
    }
    if let Err(error) = stored {
        // Not acked: the broker gives the message back when the channel closes.
        return Event::PublishFailed {
            id,
            message_id,
            target,
            error,
        };
    }
    let mut fault_error = None;
    if let (Some(event), Some(exchange)) = (&fault, &topo.faults_exchange) {
        match Box::pin(fault::publish(&broker, exchange, event)).await {
            fault::Published::Confirmed => {}
            fault::Published::Refused(e) => fault_error = Some(e.coded_message()),
            // Held: delivered again, the message parks again, with its fault event.
            fault::Published::Lost(error) => {
                return Event::PublishFailed {
                    id,
                    message_id,
                    target: exchange.clone(),
                    error,
                }
            }
        }
    }
    drop(fault);
    match route {
        Route::Retry {
            delay,
            next_attempt,
            ..
        } => Event::Retried {
            id,
            message_id,
            target,
            attempt: next_attempt,
            delay: delay.label(),
            error: f.message,
        },
        Route::Return {
            delay,
            next_attempt,
        } => returned(&topo.queue, id, &p, f, delay, next_attempt),
        Route::Table { next_attempt } => Event::Stored {
            id,
            message_id,
            row_id: row_id.unwrap_or_default(),
            attempt: next_attempt,
            dependency: f.table.and_then(|t| t.dependency),
            error: f.message,
        },
        Route::Park { reason, attempt } => Event::Parked {
            id,
            message_id,
            target,
            reason: reason.as_str().to_owned(),
            attempt,
            error: f.message,
            fault_error,
        },
    }
}

/// The `retry` event of a delivery returned to the broker (its work queue
/// `queue`), which holds it for `delay` before delivering it again.
pub(super) fn returned(
    queue: &str,
    id: u64,
    p: &Pending,
    f: Failure,
    delay: Delay,
    next_attempt: u32,
) -> Event {
    Event::Retried {
        id,
        message_id: p.delivery.properties.message_id().as_ref().map(lossy),
        target: queue.to_owned(),
        attempt: next_attempt,
        delay: delay.label(),
        error: f.message,
    }
}

/// The event of a return (`returned`) whose reject failed: the delivery is
/// held, and the broker takes it back with the channel.
pub(super) fn return_failed(event: Event, error: Error) -> Event {
    match event {
        Event::Retried {
            id,
            message_id,
            target,
            ..
        } => Event::PublishFailed {
            id,
            message_id,
            target,
            error,
        },
        other => other,
    }
}

/// A short string as text; bytes that are not UTF-8 show as U+FFFD.
fn lossy(s: &ShortString) -> String {
    String::from_utf8_lossy(&s.wire_bytes()).into_owned()
}

/// The verdict on `p` once moving it learned a fact that parks it (`learn`
/// sets it); `None` if the verdict were to hand it to its handler instead.
fn learning(
    config: &ConsumerConfig,
    p: &Pending,
    f: &Failure,
    learn: impl FnOnce(&mut Facts),
) -> Option<Route> {
    let mut facts = facts(&p.delivery, p.attempt, 0);
    learn(&mut facts);
    match verdict(f.thrown, &facts, &policy(config)) {
        Verdict::Route(route) => Some(route),
        Verdict::Handle { .. } => None,
    }
}

/// The properties of the republished copy of a failed delivery, and where
/// it goes: `route`, unless the producer's headers leave no room in the
/// frame for ours (then where the verdict sends a message whose headers are
/// too large, its largest headers dropped and named in
/// `retry-dropped-headers`: see [`copy_headers`]).
///
/// The copy keeps the body, the properties and the producer's headers. It
/// loses `expiration`, the broker's death headers and the library's own
/// headers (written anew). A `user-id` that is not `user`'s moves to
/// `retry-original-user-id`: the broker refuses a publish carrying another
/// user's id.
fn republished(
    user: &str,
    frame_max: usize,
    config: &ConsumerConfig,
    p: &Pending,
    f: &Failure,
    route: Route,
) -> (Route, BasicProperties) {
    let props = &p.delivery.properties;
    let original = props.headers().as_ref();
    let mut kept = FieldTable::default();
    if let Some(h) = original {
        for (k, v) in h.inner() {
            let name = k.as_str();
            if !is_broker_death_header(name) && !is_own_header(name) && !is_routing_header(name) {
                kept.insert(k.clone(), v.clone());
            }
        }
    }
    if let Some(trace) = &f.trace {
        // The next attempt continues the trace of this move, not the producer's.
        kept = with_trace(kept, trace);
    }
    let now = now_ms();
    let first = header_str(original, RETRY_FIRST_FAILED_AT).or_else(|| {
        // Returned to the broker, the message carries no header of ours: its
        // first failure was at least the broker's delays ago.
        let b = config.topology.broker_delay.filter(|_| p.attempt > 0)?;
        Some(iso8601_utc(now.saturating_sub(b.waited_ms(p.attempt))))
    });
    let orig_exchange = header_str(original, RETRY_ORIGINAL_EXCHANGE);
    let orig_key = header_str(original, RETRY_ORIGINAL_ROUTING_KEY);
    // Made once: the copy's properties are these, with the headers below added.
    let bare = republish_properties(props, FieldTable::default(), user);
    // `bare` holds only what republish_properties adds to the headers (a
    // moved user-id) and the header table's length: what is left of the
    // frame is for every header of the copy.
    let used = CONTENT_HEADER_OVERHEAD + BROKER_HEADROOM + properties_size(&bare);
    let input = FailureInput {
        route: &route,
        queue: &config.topology.queue,
        error_name: &f.name,
        error_message: &f.message,
        error_stack: &f.stack,
        now_ms: now,
        delivery_exchange: p.delivery.exchange.as_str(),
        delivery_routing_key: p.delivery.routing_key.as_str(),
        previous_first_failed_at: first.as_deref(),
        previous_original_exchange: orig_exchange.as_deref(),
        previous_original_routing_key: orig_key.as_deref(),
        room: frame_max.saturating_sub(used),
        minimal: !config.full_retry_headers,
    };
    let producer: Vec<ProducerHeader> = kept
        .inner()
        .iter()
        .map(|(k, v)| ProducerHeader {
            name: lossy(k),
            size: 1 + k.wire_bytes().len() + encoded_size(v),
        })
        .collect();
    let too_large = learning(config, p, f, |facts| facts.headers_too_large = true);
    let copy = copy_headers(&input, &producer, too_large.as_ref());
    let rest = kept.inner().iter().enumerate();
    let mut kept: FieldTable = rest
        .filter(|(i, _)| !copy.dropped.contains(i))
        .map(|(_, (k, v))| (k.clone(), v.clone()))
        .collect::<std::collections::BTreeMap<_, _>>()
        .into();
    if let Some(names) = copy.dropped_names {
        kept.insert(
            RETRY_DROPPED_HEADERS.into(),
            AMQPValue::LongString(LongString::from(names)),
        );
    }
    for (name, value) in copy.ours {
        let v = match value {
            HeaderValue::Int(i) => AMQPValue::LongLongInt(i),
            // An undecodable exchange or routing key is written back as its bytes.
            HeaderValue::Str(s) => {
                AMQPValue::LongString(LongString::from(short_string_wire_bytes(&s).into_owned()))
            }
        };
        kept.insert(name.into(), v);
    }
    // What republish_properties put in the headers (a moved user-id) goes over the copy's own.
    if let Some(moved) = bare.headers() {
        for (k, v) in moved.inner() {
            kept.insert(k.clone(), v.clone());
        }
    }
    (copy.route, bare.with_headers(kept))
}
