//! LEOTP's parameters: every constant of REFERENCE.md "LEOTP" as a field with the authors' code's
//! value as the default, the paper's variants as options, and the ablation switches.

use leoguard_core::Duration;
use leoguard_wire::leotp::{LEOTP_MSS, MAX_RATE_BPS};

/// How a mid node decides that a hole is real and re-requests it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HoleConfirm {
    /// After this wait since the hole was seen (the code: 10 ms).
    Time(Duration),
    /// After this many further Data packets of the flow arrived (the paper's Algorithm 1; an
    /// earlier version of the code used 5).
    Packets(u32),
}

/// Congestion avoidance's additive increase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdditiveIncrease {
    /// +1 per cwnd/10 MSS of data (the code: about +10 per round trip).
    PerTenthCwnd,
    /// +1 per cwnd MSS of data, about +1 per round trip (the paper).
    PerRtt,
}

/// The sign of the backpressure term at a mid node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackpressureSign {
    /// Rate = min(Rate, (BL_tar - queue) / hopSRTT + downstream rate) (the code).
    Code,
    /// Rate = min(Rate, (queue - BL_tar) / hopSRTT + downstream rate) (the paper's eq 9 as printed).
    Paper,
}

/// LEOTP's configuration, shared by consumer, mid nodes and producer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LeotpConfig {
    /// Largest Data payload, bytes (1453: 1472-byte UDP payloads less the 19-byte header). One
    /// Interest asks for at most one MSS.
    pub mss: u32,
    /// Real payload bytes travel, are cached and are delivered (the emulator, content checks);
    /// when false only ranges travel and caches keep which bytes they hold (the simulator).
    pub carry_payload: bool,

    // Ablation switches (Table II).
    /// In-network retransmission: mid nodes cache Data, detect holes, send VPHs and re-request.
    pub in_network_retx: bool,
    /// Hop-by-hop congestion control. Off: mid nodes forward Interests and Data at once, untouched,
    /// and the consumer's controller runs end to end against the producer's token bucket.
    pub hop_cc: bool,

    // Mid nodes: cache and holes.
    /// Cache capacity per node, 4096-byte blocks (20 000), LRU.
    pub cache_blocks: u32,
    /// When a hole is re-requested (code: 10 ms wait; paper: a packet count).
    pub hole_confirm: HoleConfirm,
    /// A hole is forgotten this long after it was seen (200 ms), re-requested or not.
    pub hole_purge: Duration,
    /// Data more than this many MSS above the expected offset resynchronises instead of opening a
    /// hole (100).
    pub resync_jump_mss: u32,
    /// Most holes a flow keeps open at a node (beyond it the oldest is dropped, counted).
    pub max_holes: u32,
    /// Data packets a mid node's per-flow queue toward the consumer holds (128), and the producer's
    /// send-queue size whose spare room producer Data's `wnd` reports (the producer holds ranges
    /// beyond it, up to `interest_buffer_mss`, rather than drop Interests).
    pub queue_segments: u32,
    /// Most concurrent flows a node keeps state for (the least recently active goes beyond it).
    pub max_sessions: u32,

    // Hop-by-hop congestion control (REFERENCE.md: run by each hop's requester).
    /// Congestion signal threshold M: thr * (hopSRTT - minHopRTT) > M bytes (3000).
    pub m_bytes: f64,
    /// Avoidance decrease factor k: cwnd = max(k * thr * minHopRTT / MSS, cwnd_min) (0.8).
    pub k: f64,
    /// Target backlog at a mid node, MSS (BL_tar = 5; Fig 14 sweeps 5 to 15). Must be > 0.
    pub bl_tar_mss: f64,
    /// Initial congestion window, MSS (0.2).
    pub cwnd_init: f64,
    /// Floor of the congestion window, MSS (0.2).
    pub cwnd_min: f64,
    /// Slow start ends at this cwnd, MSS (100).
    pub ss_exit_cwnd: f64,
    /// Slow start's RTT unit: cwnd += acked * (2^min(ss_max_exp, hopSRTT / unit) - 1) (30 ms).
    pub ss_rtt_unit: Duration,
    /// Cap of slow start's exponent (5).
    pub ss_max_exp: f64,
    /// Window of the minimum hop RTT (code: 10 s; paper: 5 s).
    pub min_rtt_window: Duration,
    /// Avoidance increase (code: +1 per cwnd/10 of data; paper: +1 per RTT).
    pub additive_increase: AdditiveIncrease,
    /// App-limited decrease: -this per cwnd/2 MSS of data when thr < cwnd / (2 hopSRTT) (0.1).
    pub app_limited_decrease: f64,
    /// Backpressure sign (code vs paper's eq 9).
    pub backpressure: BackpressureSign,
    /// Lowest rate a requester asks for, bit/s (0.1 Mbit/s).
    pub min_rate_bps: u64,
    /// Highest rate a requester asks for, bit/s (300 Mbit/s, the header's cap).
    pub max_rate_bps: u64,
    /// The responder's token bucket is refilled at this period (1 ms).
    pub token_interval: Duration,
    /// A requester sends a keep-alive when no Interest went out for this many hop SRTTs (0.9).
    pub keepalive_srtt: f64,
    /// A mid node stops sending keep-alives for a flow idle this long (1 s; leoguard's bound, the
    /// reference gives none).
    pub keepalive_idle: Duration,

    // Consumer.
    /// Interest pacing period (1 ms).
    pub pace_interval: Duration,
    /// Most Interests (MSS) per pacing period (10).
    pub interests_per_tick: u32,
    /// Interest buffer: the consumer requests at most this many MSS beyond what it delivered (20 000).
    pub interest_buffer_mss: u32,
    /// RTO before any sample (10 s).
    pub initial_rto: Duration,
    /// The first sample's RTO = clamp(3 rtt, min_rto, max_rto): lower bound (20 ms).
    pub min_rto: Duration,
    /// Upper bound of that clamp (60 s).
    pub max_rto: Duration,
    /// RTO = srtt + max(rto_var_floor, 4 rttvar) (1 ms).
    pub rto_var_floor: Duration,
    /// Per-Interest timeout RTO * (backoff^(n-1) + 1) for its n-th transmission (1.5).
    pub timeout_backoff: f64,
    /// Each timeout round scales srtt and RTO by this (1.1)...
    pub timeout_scale: f64,
    /// ...for fewer than this many rounds in a row (10).
    pub timeout_scale_rounds: u32,
}

impl Default for LeotpConfig {
    fn default() -> Self {
        LeotpConfig {
            mss: LEOTP_MSS as u32,
            carry_payload: true,
            in_network_retx: true,
            hop_cc: true,
            cache_blocks: 20_000,
            hole_confirm: HoleConfirm::Time(Duration::from_millis(10)),
            hole_purge: Duration::from_millis(200),
            resync_jump_mss: 100,
            max_holes: 1024,
            queue_segments: 128,
            max_sessions: 4096,
            m_bytes: 3000.0,
            k: 0.8,
            bl_tar_mss: 5.0,
            cwnd_init: 0.2,
            cwnd_min: 0.2,
            ss_exit_cwnd: 100.0,
            ss_rtt_unit: Duration::from_millis(30),
            ss_max_exp: 5.0,
            min_rtt_window: Duration::from_secs(10),
            additive_increase: AdditiveIncrease::PerTenthCwnd,
            app_limited_decrease: 0.1,
            backpressure: BackpressureSign::Code,
            min_rate_bps: 100_000,
            max_rate_bps: MAX_RATE_BPS,
            token_interval: Duration::from_millis(1),
            keepalive_srtt: 0.9,
            keepalive_idle: Duration::from_secs(1),
            pace_interval: Duration::from_millis(1),
            interests_per_tick: 10,
            interest_buffer_mss: 20_000,
            initial_rto: Duration::from_secs(10),
            min_rto: Duration::from_millis(20),
            max_rto: Duration::from_secs(60),
            rto_var_floor: Duration::from_millis(1),
            timeout_backoff: 1.5,
            timeout_scale: 1.1,
            timeout_scale_rounds: 10,
        }
    }
}

/// A LEOTP configuration that cannot work.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LeotpError {
    /// A field is out of range.
    #[error("invalid leotp.{field} = {value}: {reason}")]
    Invalid {
        /// Field name.
        field: &'static str,
        /// The value.
        value: String,
        /// The rule.
        reason: &'static str,
    },
}

fn invalid(field: &'static str, value: impl std::fmt::Display, reason: &'static str) -> LeotpError {
    LeotpError::Invalid { field, value: value.to_string(), reason }
}

fn positive(field: &'static str, v: f64) -> Result<(), LeotpError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(invalid(field, v, "must be a finite number > 0"))
    }
}

fn nonzero(field: &'static str, d: Duration) -> Result<(), LeotpError> {
    if d == Duration::ZERO {
        Err(invalid(field, d, "must be > 0"))
    } else {
        Ok(())
    }
}

fn count(field: &'static str, n: u32) -> Result<(), LeotpError> {
    if n == 0 {
        Err(invalid(field, n, "must be > 0"))
    } else {
        Ok(())
    }
}

impl LeotpConfig {
    /// The paper's variants where code and paper differ: holes confirmed by 5 packets, a 5 s
    /// minimum-RTT window, +1 per RTT, eq 9's sign.
    pub fn paper() -> LeotpConfig {
        LeotpConfig {
            hole_confirm: HoleConfirm::Packets(5),
            min_rtt_window: Duration::from_secs(5),
            additive_increase: AdditiveIncrease::PerRtt,
            backpressure: BackpressureSign::Paper,
            ..LeotpConfig::default()
        }
    }

    /// Checks every field; the error names the first field that is wrong.
    pub fn validate(&self) -> Result<(), LeotpError> {
        if self.mss == 0 || self.mss as usize > LEOTP_MSS {
            return Err(invalid("mss", self.mss, "must be in 1..=1453 (one Data payload within the 1472-byte MTU)"));
        }
        count("cache_blocks", self.cache_blocks)?;
        match self.hole_confirm {
            HoleConfirm::Time(d) => nonzero("hole_confirm", d)?,
            HoleConfirm::Packets(n) => count("hole_confirm", n)?,
        }
        nonzero("hole_purge", self.hole_purge)?;
        if let HoleConfirm::Time(d) = self.hole_confirm {
            if d >= self.hole_purge {
                return Err(invalid("hole_purge", self.hole_purge, "must be longer than the hole_confirm wait"));
            }
        }
        count("resync_jump_mss", self.resync_jump_mss)?;
        count("max_holes", self.max_holes)?;
        count("queue_segments", self.queue_segments)?;
        if self.queue_segments > i16::MAX as u32 {
            return Err(invalid("queue_segments", self.queue_segments, "must fit the 16-bit wnd field (<= 32767)"));
        }
        count("max_sessions", self.max_sessions)?;
        positive("m_bytes", self.m_bytes)?;
        positive("k", self.k)?;
        positive("bl_tar_mss", self.bl_tar_mss)?;
        positive("cwnd_init", self.cwnd_init)?;
        positive("cwnd_min", self.cwnd_min)?;
        if self.cwnd_init < self.cwnd_min {
            return Err(invalid("cwnd_init", self.cwnd_init, "must be >= cwnd_min"));
        }
        positive("ss_exit_cwnd", self.ss_exit_cwnd)?;
        nonzero("ss_rtt_unit", self.ss_rtt_unit)?;
        positive("ss_max_exp", self.ss_max_exp)?;
        nonzero("min_rtt_window", self.min_rtt_window)?;
        if !(self.app_limited_decrease.is_finite() && self.app_limited_decrease >= 0.0) {
            return Err(invalid("app_limited_decrease", self.app_limited_decrease, "must be a finite number >= 0"));
        }
        if self.min_rate_bps == 0 {
            return Err(invalid("min_rate_bps", self.min_rate_bps, "must be > 0"));
        }
        if self.max_rate_bps < self.min_rate_bps || self.max_rate_bps > MAX_RATE_BPS {
            return Err(invalid("max_rate_bps", self.max_rate_bps, "must be in min_rate_bps..=300 Mbit/s"));
        }
        nonzero("token_interval", self.token_interval)?;
        positive("keepalive_srtt", self.keepalive_srtt)?;
        nonzero("keepalive_idle", self.keepalive_idle)?;
        nonzero("pace_interval", self.pace_interval)?;
        count("interests_per_tick", self.interests_per_tick)?;
        count("interest_buffer_mss", self.interest_buffer_mss)?;
        nonzero("initial_rto", self.initial_rto)?;
        nonzero("min_rto", self.min_rto)?;
        if self.max_rto < self.min_rto {
            return Err(invalid("max_rto", self.max_rto, "must be >= min_rto"));
        }
        if !(self.timeout_backoff.is_finite() && self.timeout_backoff >= 1.0) {
            return Err(invalid("timeout_backoff", self.timeout_backoff, "must be a finite number >= 1"));
        }
        if !(self.timeout_scale.is_finite() && self.timeout_scale >= 1.0) {
            return Err(invalid("timeout_scale", self.timeout_scale, "must be a finite number >= 1"));
        }
        Ok(())
    }

    /// The target backlog in bytes.
    pub(crate) fn bl_tar_bytes(&self) -> f64 {
        self.bl_tar_mss * f64::from(self.mss)
    }
}
