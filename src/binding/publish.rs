//! `NativeClient`'s publishes: the application's, sent in call order, and
//! the replies to requests.

use napi::bindgen_prelude::{AsyncBlock, Buffer};
use napi::Env;
use napi_derive::napi;

use super::client::NativeClient;
use super::convert::{js_error, sent_in_turn, MessageProperties};

#[napi]
impl NativeClient {
    /// Publishes with `mandatory` on the confirm channel and waits for the
    /// broker; rejects with `UNROUTABLE`, `PUBLISH_NACKED` or `PUBLISH_FAILED`.
    /// Publishes reach the broker in call order (the turn is taken here, on
    /// the JavaScript thread), their confirms awaited together.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn publish(
        &self,
        env: &Env,
        exchange: String,
        routing_key: String,
        body: Buffer,
        properties: Option<MessageProperties>,
    ) -> napi::Result<AsyncBlock<()>> {
        let (turn, broker) = (self.broker.publish_turn(), self.broker.clone());
        sent_in_turn(env, properties, |props| async move {
            broker
                .publish_in_turn(turn, &exchange, &routing_key, &body, props)
                .await
        })
    }

    /// Publishes a reply to a request's `reply-to` (the default exchange),
    /// mandatory, on the connection of replies, and waits for the broker;
    /// rejects with `REPLY_REFUSED` when the broker would refuse the reply
    /// or did (closing the channel over it), `UNROUTABLE` (a reply to a
    /// named queue; see `Replier::reply`), `PUBLISH_NACKED` or `PUBLISH_FAILED`.
    #[napi]
    pub async fn reply(
        &self,
        reply_to: String,
        body: Buffer,
        properties: Option<MessageProperties>,
    ) -> napi::Result<()> {
        let props = properties.unwrap_or_default().into_amqp()?;
        self.replier
            .reply(&reply_to, &body, props)
            .await
            .map_err(js_error)
    }
}
