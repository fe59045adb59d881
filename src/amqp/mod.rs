//! The broker side: connection, topology, consumer, confirmed publisher and
//! requests that wait for a reply, on lapin and tokio.

pub(crate) mod connection;
pub(crate) mod fields;
pub(crate) mod hosts;
pub(crate) mod parked;
pub(crate) mod publisher;
pub(crate) mod reply;
pub(crate) mod topology;
