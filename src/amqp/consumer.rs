//! A consumer of one work queue. Deliveries are handed to JavaScript in
//! batches through an inbox; JavaScript settles each one with a cheap
//! synchronous call, and a single task per consumer acks successes and routes
//! failures (confirmed republish to a retry or parked queue, then ack; acks
//! go out as one `multiple` frame for each settled prefix of delivery tags).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::{FutureExt, StreamExt};
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicNackOptions, BasicQosOptions,
};
use lapin::types::{short_string_wire_bytes, AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinSet;

use super::acks::{AckLedger, AckOp};
use super::connection::Broker;
use super::error::{Error, ErrorKind, Result};
use super::fields::{
    attempt_of, encoded_size, header, header_str, now_ms, properties_size, table_size,
    to_field_value, undecodable_field, CONTENT_HEADER_OVERHEAD,
};
use super::publisher::republish_properties;
use super::topology::Topology;
use crate::retry::headers::{cut_utf8, MAX_ERROR_MESSAGE_BYTES};
use crate::retry::time::parse_iso8601_utc;
use crate::retry::{
    exceeds_delivery_limit, failure_headers, is_broker_death_header, is_own_header,
    parked_queue_name, retry_queue_name, route_failure_with_table, Backoff, FailureInput,
    HeaderValue, ParkReason, Route, RETRY_DROPPED_HEADERS,
};
use crate::table::store::{NewRow, RetryStore};

/// How long one broker round trip of starting, recovering or stopping a
/// consumer (declare, channel open, qos, consume, cancel, close, ack) may
/// take, unless the consumer's options say otherwise.
pub const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_secs(15);

/// How long `stop` waits for the broker to finish a cancel before it goes on.
const CANCEL_DRAIN: Duration = Duration::from_secs(5);

/// How long settled deliveries wait behind an unsettled one before they are
/// acked one by one: a republish waiting for its confirm (which usually comes
/// within milliseconds, and then one `multiple` ack covers them all), or a
/// handler still running while fewer than half the prefetch wait behind it.
const ACK_MAX_HOLD: Duration = Duration::from_millis(100);

/// How long a consumer with nothing in flight keeps deliveries whose
/// republish failed before it reopens its channel so the broker redelivers them.
const HELD_RELEASE_IDLE: Duration = Duration::from_secs(5);

/// Room kept free in a republished message's header frame for what the broker
/// adds when a retry queue dead-letters it back (`x-death`, `x-first-death-*`,
/// `x-last-death-*`), so the copy still fits one frame when it comes back.
const BROKER_HEADROOM: usize = 2048;

/// Deliveries taken from lapin's queue at most before JavaScript is woken.
const MAX_DRAIN: usize = 256;

/// How a consumer comes back after its channel or connection is lost.
#[derive(Debug, Clone, Copy)]
pub struct Recovery {
    /// The wait between tries.
    pub backoff: Backoff,
    /// Give up after this many tries; `None` never gives up.
    pub max_attempts: Option<u32>,
    /// How long one broker round trip of starting, recovering or stopping may
    /// take before it counts as failed.
    pub step_timeout: Duration,
}

impl Default for Recovery {
    fn default() -> Self {
        Self {
            backoff: Backoff::default(),
            max_attempts: None,
            step_timeout: DEFAULT_STEP_TIMEOUT,
        }
    }
}

/// What a consumer needs besides the broker.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// The queues to declare and consume.
    pub topology: Topology,
    /// At most this many deliveries unacknowledged at once.
    pub prefetch: u16,
    /// Reconnecting after a loss.
    pub recovery: Recovery,
    /// The retry table, when failures go there after the retry queues.
    pub table: Option<TableConfig>,
}

/// A handler's error, as data (JavaScript passes name, message and stack).
#[derive(Debug, Clone, Default)]
pub struct Failure {
    /// The error's name or class.
    pub name: String,
    /// The error's message.
    pub message: String,
    /// The error's stack.
    pub stack: String,
    /// Whether another attempt could succeed.
    pub retryable: bool,
    /// Where the row goes when the route is the retry table.
    pub table: Option<TableFailure>,
}

/// What JavaScript worked out for a row of the retry table.
#[derive(Debug, Clone, Default)]
pub struct TableFailure {
    /// What the message waits on.
    pub dependency: Option<String>,
    /// Whose message it is.
    pub tenant: Option<String>,
    /// When it is due; `None` waits for a person.
    pub next_attempt_at: Option<SystemTime>,
}

/// The retry table after the retry queues.
#[derive(Clone)]
pub struct TableConfig {
    /// The table.
    pub store: Arc<RetryStore>,
    /// Attempts through the table before the message parks as exhausted.
    pub max_attempts: u32,
}

impl std::fmt::Debug for TableConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableConfig")
            .field("max_attempts", &self.max_attempts)
            .finish()
    }
}

/// How JavaScript settled a delivery.
#[derive(Debug, Clone)]
enum Settlement {
    /// The handler resolved: ack.
    Ack,
    /// The handler threw: retry or park.
    Fail(Failure),
}

/// A delivery as JavaScript sees it.
#[derive(Debug, Clone)]
pub struct DeliveryData {
    /// The consumer's own id for the delivery, used to settle it.
    pub id: u64,
    /// The body.
    pub body: Vec<u8>,
    /// The exchange it was published to.
    pub exchange: String,
    /// Its routing key.
    pub routing_key: String,
    /// Whether the broker delivered it before.
    pub redelivered: bool,
    /// Earlier failed attempts.
    pub attempt: u32,
    /// Its properties and headers.
    pub properties: BasicProperties,
}

/// What happened to a failed delivery, or to the consumer.
#[derive(Debug, Clone)]
pub enum Event {
    /// Sent to a retry queue and acked.
    Retried {
        /// The delivery id.
        id: u64,
        /// The message id, if it has one.
        message_id: Option<String>,
        /// The retry queue.
        target: String,
        /// The `retry-attempt` written.
        attempt: u32,
        /// The delay's label.
        delay: String,
        /// The handler's error message.
        error: String,
    },
    /// Sent to the parked queue and acked.
    Parked {
        /// The delivery id.
        id: u64,
        /// The message id, if it has one.
        message_id: Option<String>,
        /// The parked queue.
        target: String,
        /// `exhausted` or `non-retryable`.
        reason: String,
        /// The `retry-attempt` written.
        attempt: u32,
        /// The handler's error message.
        error: String,
    },
    /// Stored in the retry table and acked.
    Stored {
        /// The delivery id.
        id: u64,
        /// The message id, if it has one.
        message_id: Option<String>,
        /// The row id.
        row_id: i64,
        /// The `retry-attempt` stored.
        attempt: u32,
        /// What it waits on.
        dependency: Option<String>,
        /// The handler's error message.
        error: String,
    },
    /// The republish failed; the delivery stays unacked and the broker
    /// redelivers it when the channel closes.
    PublishFailed {
        /// The delivery id.
        id: u64,
        /// The message id, if it has one.
        message_id: Option<String>,
        /// Where it was meant to go.
        target: String,
        /// Why it failed.
        error: Error,
    },
    /// The channel or connection was lost; the consumer is recovering.
    Disconnected {
        /// What happened.
        error: Error,
    },
    /// The consumer is consuming again.
    Recovered {
        /// Tries it took.
        attempts: u32,
        /// Milliseconds since the loss.
        after_ms: u64,
    },
    /// The consumer itself hit an error (a failed ack, a closed channel).
    ConsumerError {
        /// What went wrong.
        error: Error,
    },
}

/// One thing for JavaScript: a delivery to handle or an event to report.
#[derive(Debug)]
pub enum Item {
    /// A delivery to handle.
    Delivery(Box<DeliveryData>),
    /// An event to report.
    Event(Event),
}

#[derive(Default)]
struct InboxState {
    items: VecDeque<Item>,
    closed: bool,
}

/// Hands items to JavaScript's pull loop.
#[derive(Default)]
struct Inbox {
    state: Mutex<InboxState>,
    notify: Notify,
}

impl Inbox {
    fn push(&self, item: Item) {
        self.state.lock().expect("inbox lock").items.push_back(item);
        self.notify.notify_one();
    }

    /// Hands over several items with a single wake-up of the pull loop.
    fn push_all(&self, items: &mut Vec<Item>) {
        if items.is_empty() {
            return;
        }
        self.state
            .lock()
            .expect("inbox lock")
            .items
            .extend(items.drain(..));
        self.notify.notify_one();
    }

    fn close(&self) {
        self.state.lock().expect("inbox lock").closed = true;
        self.notify.notify_one();
    }
}

enum Command {
    SettleMany(Vec<u64>, Vec<(u64, Failure)>),
    Stop(oneshot::Sender<()>),
    Finish(oneshot::Sender<()>),
}

/// What a consumer is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerState {
    /// Receiving deliveries.
    Connected,
    /// The channel or connection was lost; reconnecting with backoff.
    Recovering,
    /// Closed, or recovery gave up.
    Closed,
}

impl ConsumerState {
    /// `connected`, `recovering` or `closed`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConsumerState::Connected => "connected",
            ConsumerState::Recovering => "recovering",
            ConsumerState::Closed => "closed",
        }
    }
}

/// A running consumer; cheap to share.
pub struct ConsumerHandle {
    inbox: Arc<Inbox>,
    ctl: mpsc::UnboundedSender<Command>,
    queue: String,
    state: Arc<Mutex<ConsumerState>>,
}

struct Pending {
    delivery: Delivery,
    attempt: u32,
}

/// Declares the topology and subscribes: a channel with the prefetch set and
/// a lapin consumer on the work queue.
async fn subscribe(broker: &Broker, config: &ConsumerConfig) -> Result<(Channel, lapin::Consumer)> {
    let queue = &config.topology.queue;
    let step = config.recovery.step_timeout;
    declare(broker, &config.topology, step).await?;
    let ch = bounded("opening a channel", step, broker.channel()).await?;
    bounded("basic.qos", step, async {
        ch.basic_qos(config.prefetch, BasicQosOptions::default())
            .await
            .map_err(|e| Error::new(ErrorKind::Connection, format!("basic.qos failed: {e}")))
    })
    .await?;
    let consumer = bounded("basic.consume", step, async {
        ch.basic_consume(
            queue.as_str().into(),
            "".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(|e| {
            Error::new(
                ErrorKind::Connection,
                format!("could not consume from '{queue}': {e}"),
            )
        })
    })
    .await?;
    Ok((ch, consumer))
}

/// Runs one broker round trip of starting, recovering or stopping, failing it
/// when the broker does not answer within `limit`: a step that never
/// completes must not hold the consumer (and its `close`) for good.
async fn bounded<T>(
    what: &str,
    limit: Duration,
    step: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    tokio::time::timeout(limit, step).await.unwrap_or_else(|_| {
        Err(Error::new(
            ErrorKind::Connection,
            format!(
                "{what} got no answer from the broker within {} ms",
                limit.as_millis()
            ),
        ))
    })
}

/// Closes `ch`, waiting at most `limit` for the broker.
async fn close_channel(ch: &Channel, reason: &str, limit: Duration) {
    if ch.status().connected() {
        let _ = tokio::time::timeout(limit, ch.close(200, reason.into())).await;
    }
}

/// Checks and declares `topology`, each broker round trip bounded by `limit`.
async fn declare(broker: &Broker, topology: &Topology, limit: Duration) -> Result<()> {
    bounded("declaring the queues", limit, topology.declare(broker)).await
}

impl ConsumerHandle {
    /// Declares the topology, sets the prefetch and starts consuming.
    pub async fn start(broker: Arc<Broker>, config: ConsumerConfig) -> Result<ConsumerHandle> {
        let (ch, consumer) = subscribe(&broker, &config).await?;
        let queue = config.topology.queue.clone();
        let config_prefetch = config.prefetch;
        let inbox = Arc::new(Inbox::default());
        let state = Arc::new(Mutex::new(ConsumerState::Connected));
        let (tx, rx) = mpsc::unbounded_channel();
        let task = ConsumerTask {
            broker,
            config: Arc::new(config),
            channel: Some(ch),
            inbox: inbox.clone(),
            pending: HashMap::new(),
            next_id: 0,
            failures: JoinSet::new(),
            acks: AckLedger::new(usize::from(config_prefetch / 2).max(1), ACK_MAX_HOLD),
            arrived: Vec::new(),
            stuck: 0,
            last_activity: Instant::now(),
            state: state.clone(),
        };
        tokio::spawn(task.run(consumer, rx));
        Ok(ConsumerHandle {
            inbox,
            ctl: tx,
            queue,
            state,
        })
    }

    /// The work queue.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// What the consumer is doing now.
    pub fn state(&self) -> ConsumerState {
        *self.state.lock().expect("state lock")
    }

    /// Waits for at least one item and returns up to `max` of them; an empty
    /// list means the consumer is closed and nothing is left.
    pub async fn recv(&self, max: usize) -> Vec<Item> {
        loop {
            let notified = self.inbox.notify.notified();
            {
                let mut st = self.inbox.state.lock().expect("inbox lock");
                if !st.items.is_empty() {
                    let n = st.items.len().min(max.max(1));
                    return st.items.drain(..n).collect();
                }
                if st.closed {
                    return Vec::new();
                }
            }
            notified.await;
        }
    }

    /// Settles many deliveries with one message to the task: `acked` are
    /// acked, `failed` retried or parked.
    pub fn settle_many(&self, acked: Vec<u64>, failed: Vec<(u64, Failure)>) -> Result<()> {
        self.ctl
            .send(Command::SettleMany(acked, failed))
            .map_err(|_| Error::new(ErrorKind::Closed, "the consumer is closed"))
    }

    /// Stops deliveries: cancels the consumer and puts every delivery that
    /// JavaScript has not taken yet back in the queue.
    pub async fn stop(&self) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        if self.ctl.send(Command::Stop(tx)).is_err() {
            return Ok(());
        }
        let _ = rx.await;
        Ok(())
    }

    /// Waits for every republish in flight, then closes the consumer's
    /// channel (the broker takes back any delivery still unacked).
    pub async fn finish(&self) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        if self.ctl.send(Command::Finish(tx)).is_err() {
            return Ok(());
        }
        let _ = rx.await;
        Ok(())
    }

    /// Takes the events JavaScript has not pulled yet.
    pub fn take_events(&self) -> Vec<Event> {
        let mut st = self.inbox.state.lock().expect("inbox lock");
        let items = std::mem::take(&mut st.items);
        let mut events = Vec::new();
        for item in items {
            match item {
                Item::Event(e) => events.push(e),
                other => st.items.push_back(other),
            }
        }
        events
    }
}

/// Where the task is: consuming, waiting to try recovery again, or done.
enum Phase {
    Consuming(lapin::Consumer),
    Recovering {
        attempt: u32,
        next_try: Instant,
        since: Instant,
    },
    Stopped,
}

struct ConsumerTask {
    broker: Arc<Broker>,
    config: Arc<ConsumerConfig>,
    channel: Option<Channel>,
    inbox: Arc<Inbox>,
    pending: HashMap<u64, Pending>,
    next_id: u64,
    failures: JoinSet<(u64, Event)>,
    acks: AckLedger,
    /// Deliveries accepted since JavaScript was last woken.
    arrived: Vec<Item>,
    stuck: usize,
    last_activity: Instant,
    state: Arc<Mutex<ConsumerState>>,
}

/// A number in [0, 1) for jitter; quality does not matter here.
fn jitter() -> f64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from(nanos % 1_000_003) / 1_000_003.0
}

impl ConsumerTask {
    async fn run(mut self, consumer: lapin::Consumer, mut rx: mpsc::UnboundedReceiver<Command>) {
        let mut phase = Phase::Consuming(consumer);
        let mut finish: Option<oneshot::Sender<()>> = None;
        // Republishes still running this long after `finish` are given up:
        // their deliveries stay unacked and go back to the queue with the channel.
        let mut finish_by: Option<Instant> = None;
        loop {
            if finish.is_some() && finish_by.is_none() {
                finish_by = Some(Instant::now() + self.step());
            }
            if let Some(reply) = finish.take() {
                if self.failures.is_empty() {
                    self.flush_acks(true).await;
                    if let Some(ch) = self.channel.take() {
                        close_channel(&ch, "consumer closed", self.step()).await;
                    }
                    self.set_state(ConsumerState::Closed);
                    self.inbox.close();
                    let _ = reply.send(());
                    return;
                }
                finish = Some(reply);
            }
            let retry_at = match &phase {
                Phase::Recovering { next_try, .. } => Some(*next_try),
                _ => None,
            };
            // Deliveries held by a failed republish go back to the broker once
            // nothing else is in flight for a while (or when every slot holds one).
            let release_at = (self.stuck > 0
                && self.pending.is_empty()
                && self.failures.is_empty()
                && matches!(phase, Phase::Consuming(_)))
            .then(|| {
                if self.stuck >= usize::from(self.config.prefetch) {
                    Instant::now()
                } else {
                    self.last_activity + HELD_RELEASE_IDLE
                }
            });
            tokio::select! {
                cmd = rx.recv() => {
                    let Some(cmd) = cmd else { return };
                    self.command(cmd, &mut phase, &mut finish).await;
                    // Settle everything JavaScript sent meanwhile before acking: one frame for many.
                    while let Ok(cmd) = rx.try_recv() {
                        self.command(cmd, &mut phase, &mut finish).await;
                    }
                },
                next = next_delivery(&mut phase) => {
                    let mut next = Some(next);
                    // Take every delivery already received, then wake JavaScript once for all of them.
                    while let Some(item) = next.take() {
                        match item {
                            Some(Ok(d)) => {
                                self.accept(d);
                                if self.arrived.len() < MAX_DRAIN {
                                    next = next_delivery(&mut phase).now_or_never();
                                }
                            }
                            Some(Err(e)) => {
                                phase = self.lost(format!("consuming from '{}' stopped: {e}", self.config.topology.queue));
                            }
                            None => {
                                // Only the broker ends the stream while we still consume:
                                // the queue was deleted, or its node went away.
                                phase = self.lost(format!("the broker cancelled the consumer of '{}' (was the queue deleted?)", self.config.topology.queue));
                            }
                        }
                    }
                    self.inbox.push_all(&mut self.arrived);
                },
                _ = sleep_until(retry_at) => {
                    if let Phase::Recovering { attempt, since, .. } = phase {
                        phase = self.recover(attempt, since).await;
                    }
                },
                Some(joined) = self.failures.join_next(), if !self.failures.is_empty() => {
                    self.last_activity = Instant::now();
                    // The broker confirms publishes in bursts: let the other
                    // republishes of the burst finish too, so that one ack
                    // frame and one batch of events cover them all.
                    tokio::task::yield_now().await;
                    let mut finished = vec![joined];
                    while let Some(joined) = self.failures.try_join_next() {
                        finished.push(joined);
                    }
                    for (tag, event) in finished.into_iter().flatten() {
                        self.failure_done(tag, event);
                    }
                },
                _ = sleep_until(self.acks.deadline()) => {},
                _ = sleep_until(finish_by), if !self.failures.is_empty() => {
                    self.failures.abort_all();
                },
                _ = sleep_until(release_at) => {
                    if let Some(ch) = self.channel.take() {
                        close_channel(&ch, "redeliver messages whose republish failed", self.step()).await;
                    }
                    phase = self.lost(format!("{} delivery(ies) of '{}' held by a failed republish went back to the broker (channel reopened)", self.stuck, self.config.topology.queue));
                },
            }
            self.flush_acks(false).await;
        }
    }

    async fn command(
        &mut self,
        cmd: Command,
        phase: &mut Phase,
        finish: &mut Option<oneshot::Sender<()>>,
    ) {
        match cmd {
            Command::SettleMany(acked, failed) => {
                for id in acked {
                    self.settle(id, Settlement::Ack);
                }
                for (id, f) in failed {
                    self.settle(id, Settlement::Fail(f));
                }
            }
            Command::Stop(reply) => {
                if let Phase::Consuming(mut consumer) = std::mem::replace(phase, Phase::Stopped) {
                    self.stop(&mut consumer).await;
                }
                self.close_inbox_deliveries().await;
                let _ = reply.send(());
            }
            Command::Finish(reply) => *finish = Some(reply),
        }
    }

    /// A republish finished: ack the original if it went where it should,
    /// hold it if not, and tell JavaScript.
    fn failure_done(&mut self, tag: u64, event: Event) {
        if matches!(event, Event::PublishFailed { .. }) {
            self.acks.hold(tag);
            self.stuck += 1;
        } else {
            self.acks.done(tag);
        }
        self.inbox.push(Item::Event(event));
    }

    /// Sends the acks the ledger says are due.
    async fn flush_acks(&mut self, force: bool) {
        let ops = self.acks.plan(force);
        if ops.is_empty() {
            return;
        }
        let Some(ch) = self.channel.clone() else {
            return;
        };
        // Every frame is queued before the first is awaited: several acks
        // cost one wake-up of the I/O thread, not one each.
        let sends = ops.into_iter().map(|op| {
            let (tag, multiple) = match op {
                AckOp::Upto(t) => (t, true),
                AckOp::One(t) => (t, false),
            };
            ch.basic_ack(tag, BasicAckOptions { multiple })
        });
        let failed =
            match tokio::time::timeout(self.step(), futures_util::future::join_all(sends)).await {
                Ok(results) => results
                    .into_iter()
                    .find_map(|r| r.err().map(|e| e.to_string())),
                Err(_) => Some(format!("no answer within {} ms", self.step().as_millis())),
            };
        if let Some(e) = failed {
            self.inbox.push(Item::Event(Event::ConsumerError {
                error: Error::new(
                    ErrorKind::Connection,
                    format!("ack failed; the broker will redeliver the message(s), so they may be handled twice: {e}"),
                ),
            }));
        }
    }

    /// How long one broker round trip may take.
    fn step(&self) -> Duration {
        self.config.recovery.step_timeout
    }

    fn set_state(&self, s: ConsumerState) {
        *self.state.lock().expect("state lock") = s;
    }

    /// The channel or connection is gone: forget its deliveries (the broker
    /// redelivers them; acking them on a new channel would be an error) and
    /// start recovering.
    fn lost(&mut self, reason: String) -> Phase {
        self.pending.clear();
        self.acks.clear();
        self.arrived.clear();
        self.stuck = 0;
        self.channel = None;
        {
            let mut st = self.inbox.state.lock().expect("inbox lock");
            st.items.retain(|i| matches!(i, Item::Event(_)));
        }
        self.set_state(ConsumerState::Recovering);
        self.inbox.push(Item::Event(Event::Disconnected {
            error: Error::new(ErrorKind::Connection, reason),
        }));
        let now = Instant::now();
        Phase::Recovering {
            attempt: 1,
            next_try: now + self.config.recovery.backoff.delay(1, jitter()),
            since: now,
        }
    }

    /// One recovery try: a live connection, the topology declared again, a
    /// new channel and consumer.
    async fn recover(&mut self, attempt: u32, since: Instant) -> Phase {
        if self.broker.is_closed() {
            return self.give_up(Error::new(
                ErrorKind::Closed,
                "the client was closed while the consumer was recovering",
            ));
        }
        match subscribe(&self.broker, &self.config).await {
            Ok((ch, consumer)) => {
                self.channel = Some(ch);
                self.set_state(ConsumerState::Connected);
                self.inbox.push(Item::Event(Event::Recovered {
                    attempts: attempt,
                    after_ms: since.elapsed().as_millis() as u64,
                }));
                Phase::Consuming(consumer)
            }
            Err(e)
                if e.kind == ErrorKind::TopologyMismatch || e.kind == ErrorKind::InvalidOptions =>
            {
                self.give_up(e)
            }
            Err(e) => match self.config.recovery.max_attempts {
                Some(max) if attempt >= max => self.give_up(Error::new(
                    e.kind,
                    format!("recovery gave up after {attempt} attempts: {}", e.message),
                )),
                _ => Phase::Recovering {
                    attempt: attempt + 1,
                    next_try: Instant::now()
                        + self.config.recovery.backoff.delay(attempt + 1, jitter()),
                    since,
                },
            },
        }
    }

    fn give_up(&mut self, error: Error) -> Phase {
        self.set_state(ConsumerState::Closed);
        self.inbox.push(Item::Event(Event::ConsumerError { error }));
        self.inbox.close();
        Phase::Stopped
    }

    /// Puts every delivery JavaScript has not taken back in the queue and
    /// closes the inbox to new deliveries.
    async fn close_inbox_deliveries(&mut self) {
        let unstarted: Vec<u64> = {
            let mut st = self.inbox.state.lock().expect("inbox lock");
            let items = std::mem::take(&mut st.items);
            let mut ids = Vec::new();
            for item in items {
                match item {
                    Item::Delivery(d) => ids.push(d.id),
                    other => st.items.push_back(other),
                }
            }
            st.closed = true;
            ids
        };
        for id in unstarted {
            if let Some(p) = self.pending.remove(&id) {
                self.acks.forget(p.delivery.delivery_tag);
                let _ = tokio::time::timeout(self.step(), p.delivery.acker.nack(requeue())).await;
            }
        }
        if *self.state.lock().expect("state lock") == ConsumerState::Recovering {
            self.set_state(ConsumerState::Closed);
        }
        self.inbox.notify.notify_one();
    }

    fn accept(&mut self, d: Delivery) {
        self.last_activity = Instant::now();
        self.acks.open(d.delivery_tag);
        self.next_id += 1;
        let id = self.next_id;
        let headers = d.properties.headers().as_ref();
        let attempt = attempt_of(headers, &self.config.topology.queue);
        if let Some((failure, reason)) = self.refused(&d) {
            let route = Route::Park { reason, attempt };
            self.acks.publishing(d.delivery_tag);
            self.route(
                id,
                Pending {
                    delivery: d,
                    attempt,
                },
                failure,
                route,
            );
            return;
        }
        let data = DeliveryData {
            id,
            body: d.data.clone(),
            exchange: d.exchange.as_str().to_owned(),
            routing_key: d.routing_key.as_str().to_owned(),
            redelivered: d.redelivered,
            attempt,
            properties: d.properties.clone(),
        };
        self.pending.insert(
            id,
            Pending {
                delivery: d,
                attempt,
            },
        );
        self.arrived.push(Item::Delivery(Box::new(data)));
    }

    /// Why a delivery must be parked without reaching the handler, if it must:
    /// a short string that is not UTF-8, or (quorum queues) too many deliveries.
    fn refused(&self, d: &Delivery) -> Option<(Failure, ParkReason)> {
        let failure = |name: &str, message: String| Failure {
            name: name.into(),
            message,
            stack: String::new(),
            retryable: false,
            table: None,
        };
        if let Some(why) = undecodable_field(&d.exchange, &d.routing_key, &d.properties) {
            return Some((failure("UndecodableMessage", why), ParkReason::Undecodable));
        }
        let limit = self.config.topology.delivery_limit?;
        let count = header(d.properties.headers().as_ref(), "x-delivery-count")
            .map(to_field_value)
            .and_then(|v| v.as_count());
        exceeds_delivery_limit(count, limit).then(|| {
            let deliveries = count.unwrap_or(0) + 1;
            (
                failure(
                    "DeliveryLimitExceeded",
                    format!(
                        "delivered {deliveries} times without being acked or rejected (limit {limit}): the consumer most likely crashes on this message, so it was parked without calling the handler again"
                    ),
                ),
                ParkReason::DeliveryLimit,
            )
        })
    }

    fn settle(&mut self, id: u64, s: Settlement) {
        self.last_activity = Instant::now();
        let Some(p) = self.pending.remove(&id) else {
            return;
        };
        match s {
            Settlement::Ack => self.acks.done(p.delivery.delivery_tag),
            Settlement::Fail(f) => {
                self.acks.publishing(p.delivery.delivery_tag);
                let table_attempts = self.config.table.as_ref().map(|t| t.max_attempts);
                let route = route_failure_with_table(
                    p.attempt,
                    &self.config.topology.delays,
                    f.retryable,
                    table_attempts,
                );
                self.route(id, p, f, route);
            }
        }
    }

    /// Republishes a failed delivery to where `route` says, on its own task.
    fn route(&mut self, id: u64, p: Pending, f: Failure, route: Route) {
        let broker = self.broker.clone();
        let config = self.config.clone();
        let tag = p.delivery.delivery_tag;
        self.failures.spawn(async move {
            let event = handle_failure(&broker, &config, id, p, f, route).await;
            (tag, event)
        });
    }

    async fn stop(&mut self, consumer: &mut lapin::Consumer) {
        let tag = consumer.tag();
        let Some(ch) = self.channel.clone() else {
            return;
        };
        if ch.status().connected() {
            let _ = tokio::time::timeout(
                self.step(),
                ch.basic_cancel(tag, BasicCancelOptions::default()),
            )
            .await;
            // Deliveries already on their way end the stream after the cancel.
            let _ = tokio::time::timeout(CANCEL_DRAIN.min(self.step()), async {
                while let Some(Ok(d)) = consumer.next().await {
                    let _ = d.acker.nack(requeue()).await;
                }
            })
            .await;
        }
    }
}

/// The next delivery while consuming; never resolves otherwise.
async fn next_delivery(phase: &mut Phase) -> Option<lapin::Result<Delivery>> {
    match phase {
        Phase::Consuming(c) => c.next().await,
        _ => std::future::pending().await,
    }
}

/// Sleeps until `at`; never resolves without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}

fn requeue() -> BasicNackOptions {
    BasicNackOptions {
        multiple: false,
        requeue: true,
    }
}

/// Routes a failed delivery: confirmed publish to its retry or parked queue,
/// then tell the task, which acks it through the ledger. On a failed publish
/// the delivery is held: never acked.
async fn handle_failure(
    broker: &Broker,
    config: &ConsumerConfig,
    id: u64,
    p: Pending,
    f: Failure,
    route: Route,
) -> Event {
    let topo = &config.topology;
    let props = &p.delivery.properties;
    let message_id = props.message_id().as_ref().map(lossy);
    let (route, properties) =
        republished(broker.user(), broker.frame_max().await, topo, &p, &f, route);
    let target = match &route {
        Route::Retry { delay, .. } => retry_queue_name(&topo.queue, *delay),
        Route::Table { .. } => "the retry table".to_owned(),
        Route::Park { .. } => parked_queue_name(&topo.queue),
    };
    let original = props.headers().as_ref();
    let first = header_str(original, "retry-first-failed-at");
    let mut row_id = None;
    let stored = match (&route, &config.table, &f.table) {
        (Route::Table { next_attempt }, Some(table), Some(t)) => {
            let row = NewRow {
                queue: topo.queue.clone(),
                body: p.delivery.data.clone(),
                properties: serde_json::to_value(&properties).unwrap_or_default(),
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
            table.store.insert(&row).await.map(|id| row_id = Some(id))
        }
        (Route::Table { .. }, _, _) => Err(Error::new(
            ErrorKind::RetryTable,
            "the route is the retry table but none is configured",
        )),
        _ => {
            let published = broker
                .republisher()
                .publish(broker, "", &target, &p.delivery.data, properties)
                .await;
            if matches!(&published, Err(e) if e.kind == ErrorKind::Unroutable) {
                // The retry or parked queue is gone (deleted by hand): declare the
                // topology again so the next failures route. This message stays
                // unacked, as every failed republish does.
                let _ = declare(broker, topo, config.recovery.step_timeout).await;
            }
            published
        }
    };
    if let Err(error) = stored {
        // Not acked: the broker gives the message back when the channel closes.
        return Event::PublishFailed {
            id,
            message_id,
            target,
            error,
        };
    }
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
        },
    }
}

/// A short string as text; bytes that are not UTF-8 show as U+FFFD.
fn lossy(s: &ShortString) -> String {
    String::from_utf8_lossy(&s.wire_bytes()).into_owned()
}

/// The properties of the republished copy of a failed delivery, and where
/// it goes: `route`, unless the producer's headers leave no room in the
/// frame for ours (then it parks as `headers-too-large`, its largest headers
/// dropped and named in `retry-dropped-headers`).
///
/// The copy keeps the body, the properties and the producer's headers. It
/// loses `expiration`, the broker's death headers and the library's own
/// headers (written anew). A `user-id` that is not `user`'s moves to
/// `retry-original-user-id`: the broker refuses a publish carrying another
/// user's id.
fn republished(
    user: &str,
    frame_max: usize,
    topo: &Topology,
    p: &Pending,
    f: &Failure,
    route: Route,
) -> (Route, BasicProperties) {
    let props = &p.delivery.properties;
    let original = props.headers().as_ref();
    let mut kept = FieldTable::default();
    if let Some(h) = original {
        for (k, v) in h.inner() {
            if !is_broker_death_header(k.as_str()) && !is_own_header(k.as_str()) {
                kept.insert(k.clone(), v.clone());
            }
        }
    }
    let first = header_str(original, "retry-first-failed-at");
    let orig_exchange = header_str(original, "retry-original-exchange");
    let orig_key = header_str(original, "retry-original-routing-key");
    let mut route = route;
    let mut dropped: Vec<String> = Vec::new();
    loop {
        if !dropped.is_empty() {
            kept.insert(
                RETRY_DROPPED_HEADERS.into(),
                AMQPValue::LongString(LongString::from(dropped.join(","))),
            );
        }
        let bare = republish_properties(props, FieldTable::default(), user);
        // `bare` holds only what republish_properties adds to the headers
        // (a moved user-id); its table's 4 bytes are counted by `table_size(&kept)`.
        let used = CONTENT_HEADER_OVERHEAD + BROKER_HEADROOM + properties_size(&bare) - 4
            + table_size(&kept);
        let input = FailureInput {
            route: &route,
            queue: &topo.queue,
            error_name: &f.name,
            error_message: &f.message,
            error_stack: &f.stack,
            now_ms: now_ms(),
            delivery_exchange: p.delivery.exchange.as_str(),
            delivery_routing_key: p.delivery.routing_key.as_str(),
            previous_first_failed_at: first.as_deref(),
            previous_original_exchange: orig_exchange.as_deref(),
            previous_original_routing_key: orig_key.as_deref(),
            room: frame_max.saturating_sub(used),
        };
        let largest = match failure_headers(&input) {
            Ok(headers) => {
                for (name, value) in headers {
                    let v = match value {
                        HeaderValue::Int(i) => AMQPValue::LongLongInt(i),
                        // An undecodable exchange or routing key is written back as its bytes.
                        HeaderValue::Str(s) => AMQPValue::LongString(LongString::from(
                            short_string_wire_bytes(&s).into_owned(),
                        )),
                    };
                    kept.insert(name.into(), v);
                }
                return (route, republish_properties(props, kept, user));
            }
            Err(_) => kept
                .inner()
                .iter()
                .filter(|(k, _)| k.as_str() != RETRY_DROPPED_HEADERS)
                .max_by_key(|(k, v)| 1 + k.wire_bytes().len() + encoded_size(v))
                .map(|(k, _)| k.clone()),
        };
        let Some(largest) = largest else {
            // Nothing of the producer's is left to drop: the properties alone
            // fill the frame, which a broker never delivers.
            return (route, republish_properties(props, kept, user));
        };
        route = Route::Park {
            reason: ParkReason::HeadersTooLarge,
            attempt: p.attempt,
        };
        let mut rest = kept.inner().clone();
        rest.remove(&largest);
        kept = FieldTable::from(rest);
        dropped.push(lossy(&largest));
    }
}
