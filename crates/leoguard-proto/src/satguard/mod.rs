//! SATGUARD (papers/satguard.txt): link-local retransmission in orbit with handover-aware buffer
//! migration, beam-based loss timers and ground-side reordering, as sans-IO state machines.

pub mod hop;
pub mod reorder;
