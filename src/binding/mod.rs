//! The only module that knows about Node-API: option objects, the native
//! classes the TypeScript layer wraps, and error mapping.
//!
//! Errors cross as `[CODE] message` strings (custom codes do not survive async
//! functions); the TypeScript layer turns them into typed error classes.

mod client;
mod consumer;
mod contract;
mod convert;
mod declare;
mod failures;
mod names;
mod outbox;
mod parked;
mod publish;
mod reply;
mod spec;
mod table;
mod wire;

/// The runtime behind every async call and consumer task: one worker thread.
/// A consumer's work is a chain of short steps handed between lapin's I/O
/// thread, its task and JavaScript; a second worker only adds wake-ups and
/// lock contention between the two, on CPU the broker could use.
#[napi_derive::module_init]
fn init_runtime() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("rabbit-retry")
        .enable_all()
        .build();
    // Should the runtime not start (no thread could be spawned), napi-rs starts
    // its default one on first use instead.
    if let Ok(rt) = rt {
        napi::bindgen_prelude::create_custom_tokio_runtime(rt);
    }
}
