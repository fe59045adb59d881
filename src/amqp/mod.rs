//! The broker side: connection, topology, consumer and confirmed publisher,
//! on lapin and tokio.

pub mod acks;
pub mod connection;
pub mod consumer;
pub mod error;
pub mod fields;
pub mod parked;
pub mod publisher;
pub mod topology;
