//! The only module that knows about Node-API: option objects, the native
//! classes the TypeScript layer wraps, and error mapping.
//!
//! Errors cross as `[CODE] message` strings (custom codes do not survive async
//! functions); the TypeScript layer turns them into typed error classes.

mod client;
mod consumer;
mod convert;
mod parked;
mod table;

pub use client::*;
pub use consumer::*;
pub use convert::*;
pub use parked::*;
pub use table::*;
