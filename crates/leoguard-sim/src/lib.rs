//! leoguard-sim: the discrete-event packet-level simulator (work in progress, issue 3).

pub mod capture;
pub mod constellation;
pub mod engine;
pub mod leo;
pub mod loss;
pub mod scenario;
pub mod schemes;
pub mod sim;
pub mod tcp_agent;
pub mod web;
pub mod webrtc;
