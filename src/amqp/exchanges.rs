//! The exchanges a connection has seen exist. A publish to an exchange that
//! does not exist closes its channel, and with it every publish in flight
//! there, so the first publish to an exchange asks the broker about it on a
//! channel of its own (a passive declare), and only a publish to one that
//! exists goes on the shared channel. Publishes to one exchange share one
//! question; an answer of "missing" is not kept, so an exchange declared
//! later is found.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use lapin::options::ExchangeDeclareOptions;
use lapin::types::FieldTable;
use lapin::ExchangeKind;
use tokio::sync::OnceCell;

use super::fields::short_name;
use crate::error::{amqp_reply, Error, ErrorKind, Result};

/// What the broker answered about one exchange: it exists (`true`), it
/// could not tell (`false`), or it does not (an error).
type Answer = OnceCell<Result<bool>>;

/// The exchanges known to exist, and the questions in flight.
#[derive(Default)]
pub(crate) struct KnownExchanges {
    answers: Mutex<HashMap<String, Arc<Answer>>>,
}

impl std::fmt::Debug for KnownExchanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KnownExchanges").finish_non_exhaustive()
    }
}

impl KnownExchanges {
    /// Succeeds when `exchange` exists: at once for the default exchange and
    /// for one already seen, after asking the broker (on a channel `open`
    /// opens for it) otherwise. Fails with `UNROUTABLE` when it does not
    /// exist. A question the broker could not answer (the connection went
    /// away, a permission to ask is missing) lets the publish go on: the
    /// publish itself then tells.
    pub(crate) async fn check<F>(&self, open: impl FnOnce() -> F, exchange: &str) -> Result<()>
    where
        F: std::future::Future<Output = Result<lapin::Channel>>,
    {
        if exchange.is_empty() {
            return Ok(());
        }
        let answer = {
            let mut answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
            match answers.get(exchange) {
                Some(a) if matches!(a.get(), Some(Ok(true))) => return Ok(()),
                Some(a) => a.clone(),
                None => {
                    let a = Arc::new(Answer::new());
                    answers.insert(exchange.to_owned(), a.clone());
                    a
                }
            }
        };
        let outcome = answer
            .get_or_init(|| Box::pin(ask(open(), exchange)))
            .await
            .clone();
        if !matches!(outcome, Ok(true)) {
            self.forget_answer(exchange, &answer);
        }
        outcome.map(|_| ())
    }

    /// Forgets that `exchange` exists: the broker said it does not (a
    /// publish to it was refused), and the next publish asks again.
    pub(crate) fn forget(&self, exchange: &str) {
        self.answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(exchange);
    }

    /// Forgets `answer` about `exchange`, unless a newer one replaced it.
    fn forget_answer(&self, exchange: &str, answer: &Arc<Answer>) {
        let mut answers = self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        if answers
            .get(exchange)
            .is_some_and(|a| Arc::ptr_eq(a, answer))
        {
            answers.remove(exchange);
        }
    }
}

/// Asks the broker whether `exchange` exists, on the channel `opening`
/// opens for it.
async fn ask(
    opening: impl std::future::Future<Output = Result<lapin::Channel>>,
    exchange: &str,
) -> Result<bool> {
    let name = short_name("exchange", exchange)?;
    let Ok(ch) = opening.await else {
        return Ok(false);
    };
    let asked = ch
        .exchange_declare(
            name,
            ExchangeKind::Direct,
            ExchangeDeclareOptions {
                passive: true,
                ..ExchangeDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await;
    match asked {
        Ok(()) => {
            // Its close is not waited for: the publish goes on at once.
            tokio::spawn(async move {
                let _ = ch.close(200, "exchange checked".into()).await;
            });
            Ok(true)
        }
        // The broker closed the channel over it.
        Err(e) => match amqp_reply(&e) {
            Some((404, text)) => Err(Error::with_source(
                ErrorKind::Unroutable,
                format!("cannot publish to exchange '{exchange}': it does not exist ({text}); declare the exchange first"),
                e,
            )),
            _ => Ok(false),
        },
    }
}
