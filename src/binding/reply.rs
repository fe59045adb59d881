//! `NativeReplySession`: requests published with direct reply-to, and their
//! replies, for a client that waits for an answer.

use std::sync::Arc;

use napi::bindgen_prelude::{AsyncBlock, Buffer};
use napi::Env;
use napi_derive::napi;

use super::convert::{js_error, sent_in_turn, MessageProperties};
use super::wire::{to_batch, NativeBatch};
use crate::amqp::reply::ReplySession;
use crate::consumer::DeliveryView;

/// A channel that publishes requests and receives their replies.
#[napi]
pub struct NativeReplySession {
    session: Arc<ReplySession>,
}

impl NativeReplySession {
    pub(crate) fn new(session: ReplySession) -> Self {
        Self {
            session: Arc::new(session),
        }
    }
}

#[napi]
impl NativeReplySession {
    /// Publishes a request with `reply-to` set to direct reply-to, mandatory,
    /// and waits for the broker's confirm; rejects with `UNROUTABLE`,
    /// `PUBLISH_NACKED`, `PUBLISH_FAILED` or `CLOSED`.
    /// Requests reach the broker in the order of the calls.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn request(
        &self,
        env: &Env,
        exchange: String,
        routing_key: String,
        body: Buffer,
        properties: Option<MessageProperties>,
    ) -> napi::Result<AsyncBlock<()>> {
        let (turn, session) = (self.session.turn(), self.session.clone());
        sent_in_turn(env, properties, |props| async move {
            session
                .request(turn, &exchange, &routing_key, &body, props)
                .await
        })
    }

    /// Waits for the next replies (at most `max`), in the consumer's batch
    /// form; a batch with `closed` set once the channel is closed.
    #[napi]
    pub async fn next(&self, max: u32) -> napi::Result<NativeBatch> {
        let replies = self.session.next(max as usize).await;
        let views: Vec<DeliveryView<'_>> = replies
            .iter()
            .map(|d| DeliveryView {
                id: d.delivery_tag,
                attempt: 0,
                table_bound: false,
                parks: false,
                refused: false,
                delivery: d,
            })
            .collect();
        Ok(to_batch(&views, &[], views.is_empty()))
    }

    /// Whether the channel is open: requests can be sent and replies come.
    #[napi(getter)]
    pub fn open(&self) -> bool {
        self.session.is_open()
    }

    /// Closes the channel; replies still on their way are dropped.
    #[napi]
    pub async fn close(&self) -> napi::Result<()> {
        self.session.close().await.map_err(js_error)
    }
}
