//! leoguard's own TCP as a user-space transport over UDP (docs/transport.md): the sans-IO
//! `TcpSender`/`TcpReceiver` of `leoguard-proto`, with any controller of its registry, carried in the
//! `leoguard-wire` transport format, so a controller that only leoguard has (SaTCP, StarTCP) runs
//! between two real hosts with the same code the simulator runs.
//!
//! [`sender::Sender`] and [`receiver::Receiver`] hold everything but I/O: the application model,
//! framing, payload check and close handshake, driven with `handle_datagram(now, bytes)`,
//! `poll_transmit`, `poll_timeout()`, `handle_timeout(now)`. The binary (src/main.rs) owns the clock,
//! the socket, signals and the JSON reports.

pub mod args;
pub mod leotp;
pub mod pattern;
pub mod receiver;
pub mod report;
pub mod sender;

/// Why a datagram was dropped (each is also counted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// Not a valid transport datagram.
    Malformed,
    /// Another connection's.
    OtherFlow,
    /// Carries a critical option this end does not know.
    UnknownCritical,
    /// A message this end does not take.
    Unexpected,
    /// Payload bytes that are not the stream's at their offset.
    Corrupt,
}

#[cfg(test)]
mod netsim;
#[cfg(test)]
mod startcp_tests;
