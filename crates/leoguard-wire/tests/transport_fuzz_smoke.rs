//! Stable-Rust stand-in for the cargo-fuzz target `transport`: the same body
//! (tests/transport_fuzz_body) over 200k random and mutated datagrams from a fixed seed, so every
//! `cargo test` runs the transport parser's error paths.

mod transport_fuzz_body;

use leoguard_core::{stream, RngStream};
use leoguard_wire::{AckRepr, DataSegment, TlvOptions, TransportMessage, TransportPacket};

const SEED: u64 = 0x7C_0A_5D;

fn below(rng: &mut RngStream, n: usize) -> usize {
    (rng.next_u64() % n as u64) as usize
}

/// Valid datagrams of every message type, with and without options (StarTCP's kind 1 among them).
fn seeds() -> Vec<Vec<u8>> {
    let opts = [0x02u8, 2, 0xAB, 0xCD, 0x90, 0];
    let options = TlvOptions::parse(&opts).expect("seed options");
    let star = [0x01u8, 7, 0x53, 0x54, 0x07, 0x00, 0x01, 0x02, 0x03, 0x7F, 1, 9];
    let star = TlvOptions::parse(&star).expect("seed StarTCP options");
    let ack = AckRepr {
        cum: 5000,
        sack: [(100, 200), (6000, 7000), (9000, 9100)],
        n_sack: 3,
        rwnd: 1 << 20,
        ts_ecr_us: Some(77),
    };
    let messages = [
        TransportMessage::Data(DataSegment {
            seq: 1 << 40,
            retransmission: true,
            ts_us: 123,
            payload: b"payload bytes",
        }),
        TransportMessage::Ack(ack),
        TransportMessage::Ack(AckRepr { n_sack: 1, ..ack }),
        TransportMessage::Fin { end: 1 << 33 },
        TransportMessage::FinAck { end: 3 },
    ];
    let mut out = Vec::new();
    for m in messages {
        for o in [TlvOptions::EMPTY, options, star] {
            let p = TransportPacket { flow: 0x0102_0304, options: o, message: m };
            let mut b = vec![0u8; p.buffer_len()];
            p.emit(&mut b).expect("seed emits");
            out.push(b);
        }
    }
    out
}

fn mutate(rng: &mut RngStream, input: &mut Vec<u8>) {
    for _ in 0..1 + below(rng, 3) {
        match below(rng, 5) {
            0 if !input.is_empty() => {
                let i = below(rng, input.len());
                input[i] ^= 1 << below(rng, 8);
            }
            1 => {
                let keep = below(rng, input.len() + 1);
                input.truncate(keep);
            }
            2 => {
                let i = below(rng, input.len() + 1);
                input.insert(i, rng.next_u64() as u8);
            }
            // The version, type, options length and SACK count are where parsers go wrong.
            3 if input.len() > 28 => {
                let i = [0, 1, 3, 28][below(rng, 4)];
                input[i] = [0, 1, 2, 3, 4, 5, 0xFF][below(rng, 7)];
            }
            _ if !input.is_empty() => {
                let i = below(rng, input.len());
                input[i] = [0, 1, 2, 3, 4, 0x80, 0xFF][below(rng, 7)];
            }
            _ => {}
        }
    }
}

#[test]
fn transport_fuzz_smoke_200k() {
    let mut rng = stream(SEED, "wire/transport-fuzz-smoke");
    let seeds = seeds();
    for s in &seeds {
        assert!(TransportPacket::parse(s).is_ok());
    }
    let mut parsed = 0u32;
    for i in 0..200_000 {
        let input = if i % 4 == 0 {
            let len = below(&mut rng, 80);
            (0..len).map(|_| rng.next_u64() as u8).collect()
        } else {
            let mut v = seeds[below(&mut rng, seeds.len())].clone();
            mutate(&mut rng, &mut v);
            v
        };
        transport_fuzz_body::check(&input);
        parsed += u32::from(TransportPacket::parse(&input).is_ok());
    }
    // Enough mutated inputs must stay valid, or the round-trip half never runs.
    assert!(parsed > 20_000, "only {parsed} inputs parsed");
}
