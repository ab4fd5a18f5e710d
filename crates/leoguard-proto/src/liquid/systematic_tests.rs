//! The systematic decoder against the `raptorq` crate: its generator rows reproduce the crate's
//! repair symbols, and it recovers exactly the blocks the crate's decoder recovers, to the byte.

use super::systematic::{SystematicDecoder, MAX_K};
use super::workload::crate_decode;
use super::{Decoder, DecoderStats, Encoder, LiquidConfig};
use leoguard_core::{stream, Duration, Instant, RngStream};
use raptorq::{ObjectTransmissionInformation, SourceBlockEncoder};

fn block(rng: &mut RngStream, k: usize, t: usize) -> Vec<u8> {
    (0..k * t).map(|_| rng.next_u64() as u8).collect()
}

fn oti(k: usize, t: usize) -> ObjectTransmissionInformation {
    ObjectTransmissionInformation::new((k * t) as u64, t as u16, 1, 1, 1)
}

/// Loses each source symbol with probability `p`, keeps `extra` more repair symbols than it lost
/// (from the first `repair_sent` sent); returns what each decoder made of it.
fn trial(
    rng: &mut RngStream,
    sys: &mut SystematicDecoder,
    k: usize,
    t: usize,
    p: f64,
    extra: usize,
) -> (Vec<u8>, Option<Vec<u8>>, Option<Vec<u8>>) {
    let data = block(rng, k, t);
    let enc = SourceBlockEncoder::new(0, &oti(k, t), &data);
    let mut symbols: Vec<Option<Vec<u8>>> = data.chunks(t).map(|c| (rng.uniform() >= p).then(|| c.to_vec())).collect();
    let lost = symbols.iter().filter(|s| s.is_none()).count();
    // Some repair symbols are lost too: skip a few ESIs.
    let repair: Vec<(u32, Vec<u8>)> = enc
        .repair_packets(0, (lost + extra) as u32 * 2 + 2)
        .into_iter()
        .filter(|_| rng.uniform() >= 0.3)
        .take(lost + extra)
        .map(|p| {
            let (id, d) = p.split();
            (id.encoding_symbol_id(), d)
        })
        .collect();
    let theirs = crate_decode(k, t, &symbols, &repair);
    let ours = sys.decode(k as u32, t, &mut symbols, &repair).map(|found| {
        for (i, s) in found {
            assert!(symbols[i].is_none(), "symbol {i} was received");
            symbols[i] = Some(s);
        }
        symbols.iter().flat_map(|s| s.clone().unwrap_or_default()).collect::<Vec<u8>>()
    });
    (data, theirs, ours)
}

#[test]
fn generator_rows_reproduce_the_crates_repair_symbols() {
    let mut rng = stream(1, "systematic-rows");
    let mut sys = SystematicDecoder::default();
    for &(k, t) in &[(1usize, 16usize), (2, 8), (10, 64), (235, 1280), (300, 40)] {
        let data = block(&mut rng, k, t);
        let enc = SourceBlockEncoder::new(0, &oti(k, t), &data);
        // All source symbols lost but one row's worth: decoding from repair symbols only exercises
        // every coefficient of the rows used.
        let mut symbols: Vec<Option<Vec<u8>>> = vec![None; k];
        if k > 4 {
            for (i, c) in data.chunks(t).enumerate().skip(k / 4 + 1) {
                symbols[i] = Some(c.to_vec());
            }
        }
        let lost = symbols.iter().filter(|s| s.is_none()).count();
        let repair: Vec<(u32, Vec<u8>)> = enc
            .repair_packets(3, lost as u32 + 3)
            .into_iter()
            .map(|p| {
                let (id, d) = p.split();
                (id.encoding_symbol_id(), d)
            })
            .collect();
        // (Decoded whether or not `applies` would route this block here: with three spare repair
        // symbols a dependent set is unlikely, and the crate's decoder is asked too.)
        let theirs = crate_decode(k, t, &symbols, &repair);
        assert_eq!(theirs.as_deref(), Some(&data[..]), "k={k}: the crate's decoder");
        let found = sys.decode(k as u32, t, &mut symbols, &repair).unwrap_or_else(|| panic!("k={k}: not decoded"));
        assert_eq!(found.len(), lost);
        for (i, s) in found {
            assert_eq!(s, data[i * t..(i + 1) * t], "k={k} symbol {i}");
        }
    }
}

#[test]
fn it_recovers_exactly_what_the_crates_decoder_recovers() {
    let mut rng = stream(2, "systematic-vs-crate");
    let mut sys = SystematicDecoder::default();
    let (mut both, mut neither) = (0, 0);
    for n in 0..400 {
        let k = [5usize, 17, 40, 120, 235][n % 5];
        let t = [4usize, 32, 1280][n % 3];
        // No spare repair symbol half the time: the crate's decoder then fails about 1 % of the
        // time (RFC 6330's dependent sets), and so must this one.
        let extra = if n % 2 == 0 { 0 } else { 1 + n % 3 };
        let (data, theirs, ours) = trial(&mut rng, &mut sys, k, t, 0.05 + 0.15 * ((n / 5) % 2) as f64, extra);
        assert_eq!(ours.is_some(), theirs.is_some(), "trial {n}: k={k} extra={extra}");
        if let (Some(a), Some(b)) = (&ours, &theirs) {
            assert_eq!(a, &data[..], "trial {n}: wrong block");
            assert_eq!(b, &data[..]);
            both += 1;
        } else {
            neither += 1;
        }
    }
    assert!(both > 300, "{both} decoded");
    eprintln!("decoded by both {both}, by neither {neither}");
}

#[test]
fn too_few_symbols_or_a_block_too_large_are_left_to_the_caller() {
    let mut sys = SystematicDecoder::default();
    let mut symbols = vec![Some(vec![0u8; 8]), None, None];
    assert!(sys.decode(3, 8, &mut symbols, &[(3, vec![0; 8])]).is_none());
    assert!(!SystematicDecoder::applies(MAX_K + 1, 1));
    assert!(!SystematicDecoder::applies(100, 0));
    // Monotone in what is missing: a block lost whole is the crate's unless it is small.
    assert!(SystematicDecoder::applies(235, 39) && !SystematicDecoder::applies(235, 40));
    assert!(!SystematicDecoder::applies(235, 200) && !SystematicDecoder::applies(235, 235));
    assert!(!SystematicDecoder::applies(128, 128) && !SystematicDecoder::applies(MAX_K, MAX_K));
    assert!(SystematicDecoder::applies(20, 20));
    for k in 1..=MAX_K {
        let last = (1..=k).take_while(|&m| SystematicDecoder::applies(k, m)).last().unwrap_or(0);
        assert!((last + 1..=k).all(|m| !SystematicDecoder::applies(k, m)), "k={k}: not monotone");
    }
    // A repair symbol of the wrong length is refused, and the received symbols are left in place
    // (the same symbol at its length decodes, so the refusal is the length's).
    let mut rng = stream(4, "systematic-length");
    let data = block(&mut rng, 4, 8);
    let enc = SourceBlockEncoder::new(0, &oti(4, 8), &data);
    let received: Vec<Option<Vec<u8>>> =
        data.chunks(8).enumerate().map(|(i, c)| (i != 1).then(|| c.to_vec())).collect();
    let mut repair = enc.repair_packets(0, 8).into_iter().map(|p| {
        let (id, d) = p.split();
        (id.encoding_symbol_id(), d)
    });
    let (esi, sym) = repair
        .find(|(e, d)| sys.decode(4, 8, &mut received.clone(), &[(*e, d.clone())]).is_some())
        .expect("a repair symbol with a nonzero coefficient on symbol 1");
    let mut symbols = received.clone();
    assert!(sys.decode(4, 8, &mut symbols, &[(esi, sym[..7].to_vec())]).is_none());
    assert_eq!(symbols, received);
}

#[test]
fn it_fails_where_the_crates_decoder_fails() {
    // One source symbol lost, one repair symbol received: decodable only where that repair
    // symbol's coefficient on the lost one is nonzero. Every pair of a small block is tried; some
    // fail for both decoders, and none for one only.
    let mut rng = stream(3, "systematic-dependent");
    let mut sys = SystematicDecoder::default();
    let (k, t) = (10usize, 16usize);
    let data = block(&mut rng, k, t);
    let enc = SourceBlockEncoder::new(0, &oti(k, t), &data);
    let mut failed = 0;
    for lost in 0..k {
        for p in enc.repair_packets(0, 60) {
            let (id, d) = p.split();
            let repair = [(id.encoding_symbol_id(), d)];
            let mut symbols: Vec<Option<Vec<u8>>> =
                data.chunks(t).enumerate().map(|(i, c)| (i != lost).then(|| c.to_vec())).collect();
            let theirs = crate_decode(k, t, &symbols, &repair);
            let ours = sys.decode(k as u32, t, &mut symbols, &repair);
            assert_eq!(ours.is_some(), theirs.is_some(), "lost {lost}, repair {}", repair[0].0);
            match ours {
                Some(found) => assert_eq!(found, vec![(lost, data[lost * t..(lost + 1) * t].to_vec())]),
                None => failed += 1,
            }
        }
    }
    assert!(failed > 0, "no dependent case among {} tried", k * 60);
    eprintln!("{failed} of {} cases not decodable by either", k * 60);
}

#[test]
fn a_large_block_size_is_taken_from_its_second_block_on() {
    let mut sys = SystematicDecoder::default();
    assert!(sys.takes(100, 5), "a small size at once");
    assert!(!sys.takes(100, 90), "too many missing whatever the size");
    assert!(!sys.takes(600, 5), "first block of a large size: the crate's");
    assert!(sys.takes(600, 5), "second: here");
    assert!(!sys.takes(601, 5));
    // Sizes fall out of memory after SIZES_SEEN others.
    for k in 700..732 {
        assert!(!sys.takes(k, 1));
    }
    assert!(!sys.takes(601, 5), "forgotten");
}

/// One tunnel direction for `ms` milliseconds: packets of random sizes at `per_ms` a millisecond, each
/// datagram lost with probability `p`, the exit's feedback returned. Two exits get the same
/// datagrams, one with the crate's solver only: every packet, feedback datagram and counter must
/// match (the feedback that drives the entry is the first exit's, the second's is compared to it).
fn both_solvers(seed: u64, ms: u64, per_ms: u32, p: f64, cfg: LiquidConfig) -> (DecoderStats, u64) {
    let mut rng = stream(seed, "systematic-tunnel");
    let mut enc = Encoder::new(cfg).expect("valid");
    let (mut a, mut b) = (Decoder::new(cfg).expect("valid"), Decoder::new(cfg).expect("valid"));
    b.crate_solver_only();
    for step in 0..ms * 4 {
        let now = Instant::ZERO + Duration::from_micros(250 * step);
        if step < ms * 2 {
            for _ in 0..per_ms / 4 {
                let len = 40 + (rng.next_u64() % 1460) as usize;
                let pkt: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                enc.push(now, &pkt);
            }
        }
        enc.handle_timeout(now);
        while let Some(d) = enc.poll_transmit(now) {
            if rng.uniform() >= p {
                let (ra, rb) = (a.on_datagram(now, &d), b.on_datagram(now, &d));
                assert_eq!(ra.is_ok(), rb.is_ok());
            }
        }
        a.handle_timeout(now);
        b.handle_timeout(now);
        loop {
            let (pa, pb) = (a.poll_packet(), b.poll_packet());
            assert_eq!(pa, pb, "step {step}: packets differ");
            if pa.is_none() {
                break;
            }
        }
        loop {
            let (fa, fb) = (a.poll_feedback(now), b.poll_feedback(now));
            assert_eq!(fa, fb, "step {step}: feedback differs");
            let Some(f) = fa else { break };
            enc.on_feedback(now, &f).expect("own feedback parses");
        }
        assert_eq!(a.stats(), b.stats(), "step {step}");
    }
    assert_eq!(b.systematic_decodes(), 0);
    (a.stats(), a.systematic_decodes())
}

#[test]
fn the_tunnel_exit_behaves_the_same_with_either_solver() {
    let base = LiquidConfig::default();
    // 40 packets a millisecond (about 250 Mbit/s of 40-1500-byte packets, 5 ms blocks of about 120
    // symbols) with 2 % and 8 % loss; 200 (about 1.2 Gbit/s, blocks of about 600 symbols), 5 %;
    // blocks of 40 packets closed by count, 15 % loss (feedback repairs what proactive repair does
    // not).
    let cases = [
        (11, 600, 40, 0.02, base),
        (12, 600, 40, 0.08, base),
        (13, 300, 200, 0.05, base),
        (14, 600, 40, 0.15, LiquidConfig { max_block_packets: 40, ..base }),
    ];
    for (seed, ms, per_ms, p, cfg) in cases {
        let (s, systematic) = both_solvers(seed, ms, per_ms, p, cfg);
        eprintln!("seed {seed}: {} blocks decoded, {systematic} by the few-missing solver", s.blocks_recovered);
        assert!(s.blocks_recovered >= 20, "seed {seed}: {s:?}");
        // Blocks up to 256 symbols all go there (bar those with too many missing); larger ones
        // from their size's second block on, which blocks closed by time at 1.2 Gbit/s seldom repeat.
        let least = if per_ms > 100 { 1 } else { s.blocks_recovered / 2 };
        assert!(systematic >= least, "seed {seed}: {systematic} of {s:?}");
    }
}
