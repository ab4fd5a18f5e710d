//! Stable-Rust stand-in for the cargo-fuzz target: the same body (tests/fuzz_body) over ~200k random
//! and mutated inputs from a fixed seed, so every `cargo test` exercises the parsers' error paths.

mod fuzz_body;

use std::net::Ipv6Addr;

use leoguard_core::{stream, RngStream, Seq16};
use leoguard_wire::{
    HbhRepr, Ipv6Packet, Ipv6Repr, LinkGuardianAck, LinkGuardianLoss, LinkGuardianSeq, SatguardFlow, SatguardHack,
    SatguardHop, UdpPacket,
};

const SEED: u64 = 0x1E06_0A4D;

fn below(rng: &mut RngStream, n: usize) -> usize {
    (rng.next_u64() % n as u64) as usize
}

/// Valid packets to mutate: every option kind, with and without UDP.
fn seeds() -> Vec<Vec<u8>> {
    let (src, dst) = (Ipv6Addr::LOCALHOST, Ipv6Addr::from([0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]));
    let mut udp = [0u8; 12];
    UdpPacket { src_port: 1, dst_port: 2, payload: b"abcd" }.emit(&mut udp, &src, &dst).expect("udp");
    let hbhs = [
        HbhRepr {
            hop: Some(SatguardHop { hseq: Seq16(0xFFFF), retransmission: true, migrated: true }),
            flow: Some(SatguardFlow { fseq: Seq16(1), delay_sensitive: true }),
            ..HbhRepr::new(17)
        },
        HbhRepr {
            hack: Some(SatguardHack { cum_start: Seq16(0xFFF0), cum_end: Seq16(3), beam: 9 }),
            ..HbhRepr::new(59)
        },
        HbhRepr {
            lg_seq: Some(LinkGuardianSeq { seq: Seq16(5), retransmission: false, dummy: true }),
            lg_ack: Some(LinkGuardianAck {
                leading_ack: Seq16(7),
                loss: Some(LinkGuardianLoss { first_lost: Seq16(3), hole_size: 2 }),
                received: None,
            }),
            ..HbhRepr::new(17)
        },
    ];
    let header =
        Ipv6Repr { traffic_class: 0xB8, flow_label: 7, payload_len: 0, next_header: 17, hop_limit: 64, src, dst };
    let mut out = Vec::new();
    for hbh in hbhs {
        let payload: &[u8] = if hbh.next_header == 17 { &udp } else { &[] };
        let p = Ipv6Packet::new(header, Some(hbh), payload).expect("seed");
        let mut b = vec![0u8; p.buffer_len()];
        p.emit(&mut b).expect("emit");
        out.push(b[40..40 + hbh.buffer_len()].to_vec()); // the HBH header alone
        out.push(b);
    }
    let p = Ipv6Packet::new(header, None, &udp).expect("plain udp");
    let mut b = vec![0u8; p.buffer_len()];
    p.emit(&mut b).expect("emit");
    out.push(b[40..].to_vec());
    out.push(b);
    out
}

fn mutate(rng: &mut RngStream, input: &mut Vec<u8>) {
    for _ in 0..1 + below(rng, 4) {
        match below(rng, 5) {
            0 if !input.is_empty() => {
                let i = below(rng, input.len());
                input[i] ^= 1 << below(rng, 8);
            }
            1 if !input.is_empty() => {
                let i = below(rng, input.len());
                input[i] = rng.next_u64() as u8;
            }
            2 => {
                let keep = below(rng, input.len() + 1);
                input.truncate(keep);
            }
            3 => {
                let i = below(rng, input.len() + 1);
                input.insert(i, rng.next_u64() as u8);
            }
            // Lengths and option bytes are where parsers go wrong: poke small values there.
            _ if !input.is_empty() => {
                let i = below(rng, input.len());
                input[i] = [0, 1, 2, 4, 8, 0x1E, 0x3E, 0xFF][below(rng, 8)];
            }
            _ => {}
        }
    }
}

#[test]
fn fuzz_smoke_200k() {
    let mut rng = stream(SEED, "wire/fuzz-smoke");
    let seeds = seeds();
    let mut parsed = 0u32;
    for i in 0..200_000 {
        let input = if i % 4 == 0 {
            let len = below(&mut rng, 96);
            (0..len).map(|_| rng.next_u64() as u8).collect()
        } else {
            let mut v = seeds[below(&mut rng, seeds.len())].clone();
            mutate(&mut rng, &mut v);
            v
        };
        fuzz_body::check(&input);
        parsed += u32::from(Ipv6Packet::parse(&input).is_ok() || HbhRepr::parse(&input).is_ok());
    }
    // The mutations must leave a fair share of inputs valid, or the round-trip half is never run.
    assert!(parsed > 20_000, "only {parsed} inputs parsed");
}
