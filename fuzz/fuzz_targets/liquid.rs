//! Fuzzes the liquid tunnel's datagram parsers and state machines (docs/liquid.md): the input is
//! split into datagrams at 0xFF 0xFE markers and fed to a decoder (symbols) and an encoder
//! (feedback) with advancing time. Nothing may panic; every error is a counted `Malformed`.
#![no_main]

use leoguard_core::{Duration, Instant};
use leoguard_proto::liquid::{wire, Decoder, Encoder, LiquidConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let cfg = LiquidConfig { symbol_size: 64, ..LiquidConfig::default() };
    let (Ok(mut dec), Ok(mut enc)) = (Decoder::new(cfg), Encoder::new(cfg)) else { return };
    let mut now = Instant::ZERO;
    for d in data.split(|&b| b == 0xFF).map(|d| d.strip_prefix(&[0xFE]).unwrap_or(d)) {
        now += Duration::from_micros(300);
        let _ = wire::SymbolHeader::parse(d, 64);
        let _ = wire::parse_feedback(d);
        let _ = dec.on_datagram(now, d);
        let _ = enc.on_feedback(now, d);
        enc.push(now, d);
        while enc.poll_transmit(now).is_some() {}
        while dec.poll_packet().is_some() {}
        while dec.poll_feedback(now).is_some() {}
        dec.handle_timeout(now);
    }
});
