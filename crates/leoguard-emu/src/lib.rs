//! leoguard-emu: the real-time emulator. Real hosts are Linux network namespaces running real
//! software (kernel TCP, iperf3, ping, Chromium); one data-plane process owns every node and link of
//! the scenario, built by the same leoguard-net topology code the simulator uses, and moves the hosts'
//! real packets through them in real time. The Python front (`leoguard emu run`) creates the
//! namespaces, starts the tools and collects the results; see docs/emulator.md.

pub mod capture;
pub mod config;
mod core;
pub mod dataplane;
pub mod hbh;
pub mod hist;
mod hostio;
pub mod leotp;
pub mod net;
pub mod packet;
mod path;
mod plane;
pub mod report;
pub mod schemes;
pub mod serve;
pub mod tunio;

pub use dataplane::{DataPlane, EmuConfig, EmuError, Report};
pub use net::EmuNet;
