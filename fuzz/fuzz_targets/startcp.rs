//! Fuzzes StarTCP's parsers: the TCP option (leoguard-wire `startcp`: one option at the start, and
//! a whole TCP options area) and the learnt policy's weights file (leoguard-proto
//! `startcp::MlpPolicy::from_json`); the bytes also drive a Handover Manager as arrival gaps.
//! Nothing may panic; whatever parses must emit and parse back to the same value.
#![no_main]

use leoguard_core::{Duration, Instant};
use leoguard_proto::startcp::{ArrivalKind, HandoverManager, MlpPolicy, StartcpConfig};
use leoguard_wire::StartcpOption;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(opt) = StartcpOption::parse(data) {
        let mut buf = [0u8; 9];
        let n = opt.emit(&mut buf).expect("a parsed option emits");
        assert_eq!(n, opt.buffer_len());
        assert_eq!(StartcpOption::parse(&buf[..n]), Ok(opt));
        assert_eq!(StartcpOption::find(&buf[..n]), Ok(Some(opt)));
    }
    if let Ok(Some(opt)) = StartcpOption::find(data) {
        let mut buf = [0u8; 9];
        let n = opt.emit(&mut buf).expect("a found option emits");
        assert_eq!(StartcpOption::parse(&buf[..n]), Ok(opt));
    }
    if let Ok(mut policy) = MlpPolicy::from_json(&String::from_utf8_lossy(data)) {
        let again = MlpPolicy::from_json(&policy.to_json()).expect("a parsed policy writes a readable file");
        assert_eq!(again, policy);
        let lead = policy.lead_ms(&[50.0, 10.0, 20.0, 25.0, 1000.0]);
        assert!(lead.is_finite() && lead >= 0.0);
    }
    // Each byte is a gap in milliseconds (odd: a probe), so the manager sees random interruptions.
    let cfg = StartcpConfig { period: Duration::from_millis(1000), min_events: 1, ..StartcpConfig::default() };
    if let Ok(mut m) = HandoverManager::new(cfg) {
        let mut t = Instant::ZERO;
        for &b in data {
            t += Duration::from_micros(u64::from(b) * 250);
            let kind = if b & 1 == 1 { ArrivalKind::Probe } else { ArrivalKind::Data };
            m.on_arrival(t, kind);
            if let Some(next) = m.predict(t) {
                assert!(next > t);
            }
            let _ = m.poll_signal(t);
        }
    }
});
