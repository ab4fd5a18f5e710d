//! leoguard-core: the types every other leoguard crate shares.
//!
//! Time is integer nanoseconds (`Instant`, `Duration`), units are newtypes (`Bytes`, `Bps`), and all
//! randomness comes from [`rng::stream`], a reproducible generator derived from (run seed, component).

pub mod events;
pub mod keys;
pub mod parquet;
pub mod recent;
pub mod rng;
pub mod seq;
pub mod time;
pub mod units;

pub use events::EventQueue;
pub use keys::{KeyMap, KeySet};
pub use recent::RecentKeys;
pub use rng::{stream, DrawKey, RngStream};
pub use seq::Seq16;
pub use time::{Duration, Instant};
pub use units::{Bps, Bytes};

/// Speed of light in vacuum, m/s (REFERENCE.md: used for ISLs and radio links alike).
pub const SPEED_OF_LIGHT_M_S: f64 = 299_792_458.0;
