//! Stable-Rust stand-in for the cargo-fuzz target `leotp`: the same body (tests/leotp_fuzz_body)
//! over 200k random and mutated datagrams from a fixed seed, so every `cargo test` runs the LEOTP
//! parser's error paths.

mod leotp_fuzz_body;

use leoguard_core::{stream, RngStream};
use leoguard_wire::leotp::{LeotpHeader, LeotpPacket};

const SEED: u64 = 0x1E07_F022;

fn below(rng: &mut RngStream, n: usize) -> usize {
    (rng.next_u64() % n as u64) as usize
}

/// Valid datagrams of every kind: Interest, keep-alive, Data with payload, VPH.
fn seeds() -> Vec<Vec<u8>> {
    let payload: Vec<u8> = (0..40u8).collect();
    let packets = [
        (LeotpHeader::interest(1453, 2906, 20_000_000, 77), &[][..]),
        (LeotpHeader::keepalive(0, 100_000, u32::MAX), &[][..]),
        (LeotpHeader::data(4096, 4136, 128, 12), &payload[..]),
        (LeotpHeader::vph(0, 14_530, -3, 1), &[][..]),
    ];
    packets
        .iter()
        .map(|&(header, payload)| {
            let p = LeotpPacket { header, payload };
            let mut b = vec![0u8; p.buffer_len()];
            p.emit(&mut b).expect("seed emits");
            b
        })
        .collect()
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
            // The type byte and the low bytes of len, start and end are where parsers go wrong.
            3 if input.len() >= 19 => {
                let i = [0, 7, 11, 15][below(rng, 4)];
                input[i] = [0, 1, 2, 0x28, 0xFF][below(rng, 5)];
            }
            _ if !input.is_empty() => {
                let i = below(rng, input.len());
                input[i] = [0, 1, 2, 0x80, 0xFF][below(rng, 5)];
            }
            _ => {}
        }
    }
}

#[test]
fn leotp_fuzz_smoke_200k() {
    let mut rng = stream(SEED, "wire/leotp-fuzz-smoke");
    let seeds = seeds();
    for s in &seeds {
        assert!(LeotpPacket::parse(s).is_ok());
    }
    let (mut headers, mut packets) = (0u32, 0u32);
    for i in 0..200_000 {
        let input: Vec<u8> = if i % 4 == 0 {
            let len = below(&mut rng, 64);
            (0..len).map(|_| rng.next_u64() as u8).collect()
        } else {
            let mut v = seeds[below(&mut rng, seeds.len())].clone();
            mutate(&mut rng, &mut v);
            v
        };
        leotp_fuzz_body::check(&input);
        headers += u32::from(LeotpHeader::parse(&input).is_ok());
        packets += u32::from(LeotpPacket::parse(&input).is_ok());
    }
    // Enough mutated inputs must stay valid, or the round-trip half never runs.
    assert!(headers > 20_000 && packets > 10_000, "only {headers} headers and {packets} datagrams parsed");
}
