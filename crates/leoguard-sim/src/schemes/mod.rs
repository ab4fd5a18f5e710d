//! In-network schemes as simulator hooks: adapters that host the sans-IO state machines of
//! `leoguard-proto` on nodes (see `Agent::on_arrive` / `on_depart`).

pub mod linkguardian;
pub mod satguard;
