//! The broker side: connection, topology, consumer and confirmed publisher,
//! on lapin and tokio.

pub(crate) mod connection;
pub(crate) mod fields;
pub(crate) mod hosts;
pub(crate) mod parked;
pub(crate) mod publisher;
pub(crate) mod topology;
