//! The relay's loop and one batch: claim, publish (chains side by side,
//! each row of a chain after the one before), settle, commit.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use lapin::Channel;
use tokio::sync::watch;
use tokio::time::Instant;

use super::claim::{chains, claim, OutboxRow};
use super::outcome::{outcome_of, settle, Outcome, INVALID_PROPERTIES, TOO_LARGE};
use super::{RelayConfig, RelayCounters};
use crate::amqp::connection::Broker;
use crate::amqp::fields::short_name;
use crate::amqp::order::Turn;
use crate::amqp::properties::Properties;
use crate::amqp::publisher::{
    confirmed, forget_if_missing, publish_confirmed, OpenChannel, Publisher,
};
use crate::amqp::refusal::Refused;
use crate::error::Result;
use crate::table::row::table_error;
use crate::table::scheduler::stop::{pause, within_grace, STOP_COMMIT_WAIT, STOP_CONFIRM_WAIT};
use crate::table::store::RetryStore;

/// The first wait after an empty batch; it doubles up to the poll interval.
const IDLE_FIRST: Duration = Duration::from_millis(5);
/// The first wait after a batch that could not reach the database or the
/// broker, or whose publishes all failed; it doubles up to [`TROUBLE_MAX`].
const TROUBLE_FIRST: Duration = Duration::from_millis(250);
/// The longest wait while the database or the broker is away.
const TROUBLE_MAX: Duration = Duration::from_secs(5);

/// What one batch did.
#[derive(Debug, Default)]
struct Done {
    claimed: usize,
    published: u64,
    failed: u64,
}

/// A relay: the store it reads, the broker it publishes to, on a confirm
/// channel of its own (a publish to a missing exchange closes it, and with
/// it every confirm in flight: nobody else's).
pub(super) struct Relay {
    store: Arc<RetryStore>,
    broker: Arc<Broker>,
    config: RelayConfig,
    counters: Arc<RelayCounters>,
    /// Its confirm channel (opened again when the broker closed it), and the
    /// last one it published on.
    publisher: Publisher,
    channel: Option<Arc<Channel>>,
}

impl Relay {
    pub(super) fn new(
        store: Arc<RetryStore>,
        broker: Arc<Broker>,
        config: RelayConfig,
        counters: Arc<RelayCounters>,
    ) -> Relay {
        Relay {
            store,
            config,
            publisher: Publisher::new(broker.confirm_timeout()),
            broker,
            counters,
            channel: None,
        }
    }

    /// Publishes batches until asked to stop: at once after a batch that
    /// found rows, after a growing wait (up to the poll interval) after an
    /// empty one, after a longer one while the database or broker is away.
    pub(super) async fn run(mut self, mut stopped: watch::Receiver<bool>) {
        self.publish_until_stopped(&mut stopped).await;
        // Closed here, not dropped: lapin closes a dropped channel in the
        // background, and the client's close would find it half closed.
        if let Some(ch) = self.channel.take() {
            self.publisher.replace(&ch).await;
        }
    }

    async fn publish_until_stopped(&mut self, stopped: &mut watch::Receiver<bool>) {
        let mut idle = IDLE_FIRST;
        let mut trouble = TROUBLE_FIRST;
        let mut next = Instant::now();
        loop {
            if pause(stopped, next).await {
                return;
            }
            let done = self.batch(stopped).await;
            if *stopped.borrow() {
                return;
            }
            match done {
                Ok(done) if done.claimed == 0 => {
                    trouble = TROUBLE_FIRST;
                    next = Instant::now() + idle;
                    idle = (idle * 2).min(self.config.poll_interval);
                }
                Ok(done) if done.published == 0 && done.failed > 0 => {
                    next = Instant::now() + trouble;
                    trouble = (trouble * 2).min(TROUBLE_MAX);
                }
                Ok(_) => {
                    idle = IDLE_FIRST;
                    trouble = TROUBLE_FIRST;
                    next = Instant::now();
                }
                Err(_) => {
                    self.counters.errors.fetch_add(1, Ordering::Relaxed);
                    next = Instant::now() + trouble;
                    trouble = (trouble * 2).min(TROUBLE_MAX);
                }
            }
        }
    }

    /// One batch, in one transaction (see the module's notes). A stop before
    /// the publishes rolls it back.
    async fn batch(&mut self, stopped: &watch::Receiver<bool>) -> Result<Done> {
        let db = |e| table_error("outbox relay", e);
        // The broker first: rows are not held while it is away.
        let channel = self.publisher.channel(self.broker.as_ref());
        let Some(ch) = within_grace(stopped, Duration::ZERO, channel).await else {
            return Ok(Done::default());
        };
        let ch = ch?;
        self.channel = Some(ch.clone());
        let Some(client) = within_grace(stopped, Duration::ZERO, self.store.conn()).await else {
            return Ok(Done::default());
        };
        let mut client = client?;
        let Some(tx) = within_grace(stopped, Duration::ZERO, client.transaction()).await else {
            return Ok(Done::default());
        };
        let tx = tx.map_err(db)?;
        let rows = claim(&tx, self.config.batch_size, self.config.ordered);
        let Some(rows) = within_grace(stopped, Duration::ZERO, rows).await else {
            return Ok(Done::default());
        };
        let rows = rows?;
        if rows.is_empty() {
            tx.commit().await.map_err(db)?;
            client.done();
            return Ok(Done::default());
        }
        let outcomes = self.publish(&ch, &rows, stopped).await;
        if outcomes.iter().any(|o| matches!(o, Outcome::Nacked(_))) {
            // RabbitMQ 3.10 to 3.12 may refuse every later publish of a channel
            // that was refused once (rabbitmq-server#9241): the next batch opens another.
            self.publisher.replace(&ch).await;
        }
        let s = settle(&rows, &outcomes);
        self.counters
            .unsettled
            .store(s.delete.len() as u64 + s.unconfirmed, Ordering::Relaxed);
        let write = async {
            if !s.delete.is_empty() {
                tx.execute(
                    "DELETE FROM rabbit_retry_outbox WHERE id = ANY($1)",
                    &[&s.delete],
                )
                .await
                .map_err(db)?;
            }
            if !s.ids.is_empty() {
                tx.execute(
                    "UPDATE rabbit_retry_outbox o
                     SET attempts = o.attempts + f.refused, last_error = f.error,
                         park_reason = f.reason,
                         parked_at = CASE WHEN f.reason IS NULL THEN NULL ELSE now() END
                     FROM unnest($1::int8[], $2::text[], $3::text[], $4::int4[]) AS f(id, reason, error, refused)
                     WHERE o.id = f.id",
                    &[&s.ids, &s.reasons, &s.errors, &s.refusals],
                )
                .await
                .map_err(db)?;
            }
            tx.commit().await.map_err(db)
        };
        match within_grace(stopped, STOP_COMMIT_WAIT, write).await {
            // Cut short: rolled back; its published rows stay (unsettled).
            None => return Ok(Done::default()),
            Some(written) => written?,
        }
        client.done();
        self.counters
            .unsettled
            .store(s.unconfirmed, Ordering::Relaxed);
        self.counters
            .published
            .fetch_add(s.delete.len() as u64, Ordering::Relaxed);
        self.counters.parked.fetch_add(s.parked, Ordering::Relaxed);
        Ok(Done {
            claimed: rows.len(),
            published: s.delete.len() as u64,
            failed: s.failed,
        })
    }

    /// Publishes `rows` on `ch`: the chains side by side, each chain's rows
    /// one after the other, a chain stopping at its first row not confirmed.
    /// Once a stop is asked for, rows not sent are not sent, and the
    /// publishes in flight get [`STOP_CONFIRM_WAIT`].
    async fn publish(
        &self,
        ch: &Channel,
        rows: &[OutboxRow],
        stopped: &watch::Receiver<bool>,
    ) -> Vec<Outcome> {
        let timeout = self.broker.confirm_timeout();
        let broker = self.broker.as_ref();
        let sends = chains(rows, self.config.ordered)
            .into_iter()
            .map(|chain| async move {
                let mut out = Vec::with_capacity(chain.len());
                let mut broken = false;
                for i in chain {
                    if broken || *stopped.borrow() {
                        out.push((i, Outcome::NotSent));
                        continue;
                    }
                    let sent = within_grace(
                        stopped,
                        STOP_CONFIRM_WAIT,
                        publish_row(broker, ch, &rows[i], timeout),
                    );
                    let outcome = sent.await.unwrap_or(Outcome::Unconfirmed);
                    broken = outcome != Outcome::Confirmed;
                    out.push((i, outcome));
                }
                out
            });
        let mut outcomes = vec![Outcome::NotSent; rows.len()];
        for (i, outcome) in futures_util::future::join_all(sends)
            .await
            .into_iter()
            .flatten()
        {
            outcomes[i] = outcome;
        }
        outcomes
    }
}

/// Publishes one row, mandatory, and waits for its confirm. A row the
/// broker would refuse by closing the channel (a property, its size, a
/// missing exchange) is parked without being sent: sent, it would take the
/// rows in flight beside it down with it, and they would go out again.
async fn publish_row(broker: &Broker, ch: &Channel, row: &OutboxRow, timeout: Duration) -> Outcome {
    let props = match Properties::from_json(&row.properties).and_then(|p| p.to_amqp()) {
        Ok(props) => props,
        Err(e) => return Outcome::Park(INVALID_PROPERTIES, e),
    };
    let names =
        short_name("exchange", &row.exchange).and(short_name("routing key", &row.routing_key));
    if let Err(e) = names {
        return Outcome::Park(INVALID_PROPERTIES, e.message);
    }
    match broker.limits().check(&props, row.body.len()) {
        Ok(()) => {}
        Err(Refused::Properties(why)) => return Outcome::Park(INVALID_PROPERTIES, why),
        Err(Refused::TooLarge(why)) => return Outcome::Park(TOO_LARGE, why),
    }
    let (exchange, key) = (&row.exchange, &row.routing_key);
    if let Err(e) = broker.check_exchange(exchange).await {
        return outcome_of(exchange, Err(e));
    }
    let result = publish_confirmed(
        ch,
        Turn::alone(),
        broker.limits(),
        exchange,
        key,
        &row.body,
        props,
        timeout,
    )
    .await
    .inspect_err(|e| forget_if_missing(broker.exchanges(), exchange, e))
    .and_then(|c| confirmed(exchange, key, c));
    outcome_of(exchange, result)
}
