//! leoguard-net: what both engines need, so neither copies it (ARCHITECTURE.md, layers): the link
//! model (rate, FIFO delay line, drop-tail queue, up/down), the loss models, and the topologies
//! (explicit links, LEO paths, whole constellations) written once against [`topo::NetBuilder`].
//! The simulator (`leoguard-sim`) and the real-time emulator (`leoguard-emu`) are its siblings
//! above; neither depends on the other.

pub mod host;
pub mod link;
pub mod loss;
pub mod packet;
pub mod routes;
pub mod schemes;
pub mod topo;

pub use link::{Arrival, DropReason, Link, LinkId, LinkStats, NodeId, Offer, QueueLimit, RateSchedule, Wake};
pub use topo::{Control, Driver, NetBuilder};
