//! leoguard-proto: sans-IO protocol state machines (ARCHITECTURE.md). Time and packets in, actions
//! out: nothing here reads a clock, opens a socket or draws from a global random generator.

pub mod cc;
pub mod leotp;
pub mod linkguardian;
pub mod liquid;
pub mod packetdrill;
pub mod pep;
pub mod satguard;
pub mod startcp;
pub mod tambur;
pub mod tcp;
pub mod trace_replay;
