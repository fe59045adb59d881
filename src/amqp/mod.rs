//! The broker side: connection, topology, consumer, confirmed publisher,
//! requests that wait for a reply and the replies to them, on lapin and tokio.

pub(crate) mod connection;
pub(crate) mod declare;
pub(crate) mod exchanges;
pub(crate) mod fields;
pub(crate) mod hosts;
pub(crate) mod order;
pub(crate) mod parked;
pub(crate) mod properties;
pub(crate) mod publisher;
pub(crate) mod refusal;
pub(crate) mod replier;
pub(crate) mod reply;
pub(crate) mod topology;
