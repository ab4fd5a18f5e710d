//! leoguard-sim: the discrete-event packet-level simulator .

pub mod capture;
pub mod engine;
pub mod leotp_agent;
pub mod scenario;
pub mod schemes;
pub mod sim;
pub mod tcp_agent;
pub mod web;
pub mod webrtc;

/// Loss models (they live in leoguard-net, shared with the emulator).
pub use leoguard_net::loss;
/// The whole-constellation topology (leoguard-net).
pub use leoguard_net::topo::constellation;
/// The LEO-path topology (leoguard-net).
pub use leoguard_net::topo::leo;

#[cfg(test)]
mod topo_tests {
    mod constellation;
    mod leo;
}
