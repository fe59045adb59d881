//! `NativeClient`'s declarations outside a consumer: exchanges, queues and
//! exchange-to-exchange bindings an application lists up front.

use napi_derive::napi;

use super::client::NativeClient;
use super::convert::js_error;
use super::spec::arguments;
use crate::amqp::declare::{bind_exchange, declare_exchange, declare_queue, Declaration};

/// How to declare an exchange or a queue, as the TypeScript layer passes it.
#[napi(object)]
pub struct NativeDeclaration {
    /// Survives a broker restart.
    pub durable: bool,
    /// Deleted by the broker with its last binding (exchange) or consumer (queue).
    pub auto_delete: bool,
    /// Exchanges: `internal`. Queues: `exclusive`.
    pub private: bool,
    /// Only checked: it must exist, and nothing is created.
    pub passive: bool,
    /// Its arguments, as a JSON object.
    pub arguments: Option<String>,
}

impl NativeDeclaration {
    fn into_declaration(self, option: &str) -> napi::Result<Declaration> {
        Ok(Declaration {
            durable: self.durable,
            auto_delete: self.auto_delete,
            private: self.private,
            passive: self.passive,
            arguments: arguments(option, self.arguments.as_deref())?,
        })
    }
}

#[napi]
impl NativeClient {
    /// Declares the exchange `name` of type `kind`, or with `passive` checks
    /// that it exists (`TOPOLOGY_MISMATCH` when it does not, or has other options).
    #[napi]
    pub async fn declare_exchange(
        &self,
        name: String,
        kind: String,
        declaration: NativeDeclaration,
    ) -> napi::Result<()> {
        let d = declaration.into_declaration("arguments")?;
        declare_exchange(&self.broker, &name, &kind, d)
            .await
            .map_err(js_error)
    }

    /// Declares the queue `name`, or with `passive` checks that it exists
    /// (`TOPOLOGY_MISMATCH` when it does not, or has other options).
    #[napi]
    pub async fn declare_queue(
        &self,
        name: String,
        declaration: NativeDeclaration,
    ) -> napi::Result<()> {
        let d = declaration.into_declaration("arguments")?;
        declare_queue(&self.broker, &name, d)
            .await
            .map_err(js_error)
    }

    /// Binds the exchange `destination` to `source` with `pattern`.
    #[napi]
    pub async fn bind_exchange(
        &self,
        destination: String,
        source: String,
        pattern: String,
        arguments_json: Option<String>,
    ) -> napi::Result<()> {
        let args = arguments("arguments", arguments_json.as_deref())?;
        bind_exchange(&self.broker, &destination, &source, &pattern, args)
            .await
            .map_err(js_error)
    }
}
