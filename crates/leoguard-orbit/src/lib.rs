//! leoguard-orbit: the constellation engine.
//!
//! Walker and TLE (SGP4) constellations, the ground segment, +Grid ISLs with the grazing rule,
//! attachment policies with handover interruptions, H3 beam cells, snapshot routing and path
//! timelines. Everything is a pure function of (inputs, time): no clocks, no global state.

pub mod attach;
pub mod beams;
pub mod constellation;
pub mod error;
pub mod geo;
pub mod ground;
pub mod routing;
pub mod slotplan;
pub mod timeline;
pub mod tle;
pub mod walker;

pub use attach::{Handover, HandoverReason, InterruptionModel, Policy, SlotCriterion, SLOT_CRITERIA};
pub use constellation::{Constellation, Shell};
pub use error::OrbitError;
pub use ground::{GroundNode, Role};
pub use timeline::{path_timeline, PathTimeline, TimelineOptions};
pub use walker::{Phasing, WalkerShell};
