use super::*;
use leoguard_core::stream;

const LEN: usize = 64;

/// Encodes `frames` frames of `n` random symbols with `par` parity each; returns data payloads by
/// symbol number, layouts, and parity payloads by (frame, parity number).
#[allow(clippy::type_complexity)]
fn encode_stream(
    frames: u64,
    n: u32,
    par: u32,
    seed: u64,
) -> (BTreeMap<u64, Vec<u8>>, Vec<FrameLayout>, Vec<Vec<(u64, Vec<u8>)>>) {
    let mut rng = stream(seed, "tambur-test");
    let mut enc = Encoder::new(TamburConfig::default(), LEN);
    let (mut data, mut layouts, mut parity) = (BTreeMap::new(), Vec::new(), Vec::new());
    for _ in 0..frames {
        let syms: Vec<Vec<u8>> = (0..n).map(|_| (0..LEN).map(|_| rng.next_u64() as u8).collect()).collect();
        let refs: Vec<&[u8]> = syms.iter().map(|s| s.as_slice()).collect();
        let (l, ps) = enc.encode(&refs, par);
        for (i, s) in syms.into_iter().enumerate() {
            data.insert(l.first + i as u64, s);
        }
        parity.push(ps.into_iter().enumerate().map(|(k, p)| (l.parity_first + k as u64, p)).collect());
        layouts.push(l);
    }
    (data, layouts, parity)
}

/// Feeds everything not in `lost_data` / `lost_parity` to a decoder (payload mode if `payload`),
/// solving after each frame; returns the decoder.
fn decode(
    data: &BTreeMap<u64, Vec<u8>>,
    layouts: &[FrameLayout],
    parity: &[Vec<(u64, Vec<u8>)>],
    lost_data: &KeySet,
    lost_parity: &KeySet,
    payload: bool,
) -> (Decoder, Vec<u64>) {
    let mut dec = Decoder::new(3, payload.then_some(LEN));
    let mut rec = Vec::new();
    for l in layouts {
        dec.add_layout(*l);
        for d in l.data() {
            if !lost_data.contains(&d) {
                dec.add_data(d, payload.then(|| data[&d].as_slice()));
            }
        }
        for (pid, p) in &parity[l.frame as usize] {
            if !lost_parity.contains(pid) {
                dec.add_parity(l.frame, *pid, payload.then_some(p.as_slice()));
            }
        }
        rec.extend(dec.solve());
    }
    (dec, rec)
}

type KeySet = std::collections::BTreeSet<u64>;

#[test]
fn covered_sets_follow_the_construction() {
    let mut s = StreamLayout::new(TamburConfig::default());
    // Frames of 6 symbols: U = first 2, V = last 4.
    let (l0, c0) = s.next(6, 3);
    assert_eq!((l0.n_u, c0), (2, (0..6).collect::<Vec<_>>()));
    s.next(6, 3);
    s.next(6, 3);
    let (l3, c3) = s.next(6, 3);
    assert_eq!(l3.first, 18);
    // Parity of frame 3: U[0] = {0,1}, V[0..=3] = {2..6, 8..12, 14..18, 20..24}, U[3] = {18, 19}.
    let mut want: Vec<u64> = vec![0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23];
    want.sort_unstable();
    let mut got = c3.clone();
    got.sort_unstable();
    assert_eq!(got, want);
}

#[test]
fn losses_within_one_frames_parity_are_recovered_exactly() {
    let (data, layouts, parity) = encode_stream(8, 6, 3, 1);
    // Frame 4 loses 3 of its 6 data symbols (= its 3 parities): a Cauchy square block.
    let lost: KeySet = [24, 26, 29].into_iter().collect();
    let (dec, rec) = decode(&data, &layouts, &parity, &lost, &KeySet::new(), true);
    assert_eq!(rec, vec![24, 26, 29]);
    for d in lost {
        assert_eq!(dec.payload(d), Some(data[&d].as_slice()));
    }
}

#[test]
fn a_whole_lost_frame_is_recovered_within_tau_frames() {
    let (data, layouts, parity) = encode_stream(8, 6, 3, 2);
    // Burst: frame 2 loses all its data and parity. V[2] (4 symbols) from parities of frames 3 and 4
    // (6 equations), U[2] (2 symbols) from frame 5's parity (3 equations).
    let lost_d: KeySet = layouts[2].data().collect();
    let lost_p: KeySet = (layouts[2].parity_first..layouts[2].parity_first + 3).collect();
    let mut dec = Decoder::new(3, Some(LEN));
    let mut by_frame = Vec::new();
    for l in &layouts {
        dec.add_layout(*l);
        for d in l.data().filter(|d| !lost_d.contains(d)) {
            dec.add_data(d, Some(&data[&d]));
        }
        for (pid, p) in parity[l.frame as usize].iter().filter(|x| !lost_p.contains(&x.0)) {
            dec.add_parity(l.frame, *pid, Some(p));
        }
        by_frame.push(dec.solve());
    }
    // V[2] = {14..18} comes back once frame 4's parity is in; U[2] = {12, 13} at frame 5 = 2 + tau.
    assert!(by_frame[3].is_empty());
    assert_eq!(by_frame[4], vec![14, 15, 16, 17]);
    assert_eq!(by_frame[5], vec![12, 13]);
    for d in lost_d {
        assert_eq!(dec.payload(d), Some(data[&d].as_slice()), "symbol {d}");
    }
}

#[test]
fn losses_beyond_the_parity_are_not_recovered() {
    let (data, layouts, parity) = encode_stream(8, 6, 3, 3);
    // Frames 2 and 3 both lost entirely, with their parity: 12 unknown symbols; the parities of
    // frames 4 and 5 (6 equations) cover V[2], V[3] (8 unknowns) and frame 5's U[2]: too few, and
    // frame 6's covers only U[3], V[3]. Nothing of frame 2 can be determined.
    let lost_d: KeySet = layouts[2].data().chain(layouts[3].data()).collect();
    let lost_p: KeySet = (layouts[2].parity_first..layouts[4].parity_first).collect();
    let (dec, rec) = decode(&data, &layouts, &parity, &lost_d, &lost_p, true);
    assert!(rec.iter().all(|d| !layouts[2].data().contains(d)), "recovered {rec:?}");
    assert_eq!(dec.missing(2), Some(6));
    for d in rec {
        assert_eq!(dec.payload(d), Some(data[&d].as_slice()), "wrong bytes for {d}");
    }
}

#[test]
fn coefficient_only_decoding_agrees_with_payload_decoding() {
    let mut rng = stream(9, "tambur-agree");
    let (mut recovered, mut unrecovered) = (0, 0);
    for trial in 0..200 {
        let (data, layouts, parity) = encode_stream(9, 5, 2 + (trial % 3) as u32, trial);
        let p_loss = rng.uniform_range(0.05, 0.4);
        let lost_d: KeySet = data.keys().copied().filter(|_| rng.bernoulli(p_loss)).collect();
        let lost_p: KeySet = parity.iter().flatten().map(|x| x.0).filter(|_| rng.bernoulli(p_loss)).collect();
        let (dec_p, rec_p) = decode(&data, &layouts, &parity, &lost_d, &lost_p, true);
        let (_, rec_c) = decode(&data, &layouts, &parity, &lost_d, &lost_p, false);
        assert_eq!(rec_p, rec_c, "trial {trial}");
        recovered += rec_p.len();
        unrecovered += lost_d.len() - rec_p.len();
        for d in rec_p {
            assert!(lost_d.contains(&d));
            assert_eq!(dec_p.payload(d), Some(data[&d].as_slice()), "trial {trial}, symbol {d}");
        }
    }
    // The patterns exercise both outcomes.
    assert!(recovered > 100 && unrecovered > 100, "recovered {recovered}, unrecovered {unrecovered}");
}

/// The decoder's `missing` set is what a solve draws its unknowns from: within the layouts it holds,
/// a symbol is missing exactly when it is not known.
fn assert_missing_consistent(dec: &Decoder, when: &str) {
    for l in dec.layouts.values() {
        for d in l.span() {
            assert_eq!(dec.missing.contains(&d), !dec.known.contains_key(&d), "symbol {d} {when}");
        }
    }
    assert!(dec.missing.iter().all(|d| !dec.known.contains_key(d)), "a known symbol is missing {when}");
}

#[test]
fn missing_symbols_follow_arrivals_layouts_recoveries_and_expiry() {
    let mut rng = stream(11, "tambur-missing");
    let (data, layouts, parity) = encode_stream(40, 7, 3, 11);
    for payload in [false, true] {
        let mut dec = Decoder::new(3, payload.then_some(LEN));
        for l in &layouts {
            // Data before its layout (the simulator learns a slot's layout only once it closed), some
            // lost, then the layout, the parity, a solve and the window's expiry.
            for d in l.data().filter(|_| !rng.bernoulli(0.2)) {
                dec.add_data(d, payload.then(|| data[&d].as_slice()));
            }
            dec.add_layout(*l);
            dec.add_layout(*l);
            assert_missing_consistent(&dec, &format!("after frame {}'s layout", l.frame));
            for (pid, p) in parity[l.frame as usize].iter().filter(|_| !rng.bernoulli(0.2)) {
                dec.add_parity(l.frame, *pid, payload.then_some(p.as_slice()));
            }
            for d in dec.solve() {
                assert_eq!(dec.payload(d), payload.then(|| data[&d].as_slice()));
            }
            assert_missing_consistent(&dec, &format!("after frame {}'s solve", l.frame));
            dec.expire(l.frame);
            assert_missing_consistent(&dec, &format!("after expiring at frame {}", l.frame));
            // A late layout of a frame already expired comes back, and goes again.
            if l.frame == 20 {
                dec.add_layout(layouts[10]);
                assert_missing_consistent(&dec, "after a late layout");
                dec.expire(l.frame);
                assert_missing_consistent(&dec, "after expiring a late layout");
            }
        }
        assert!(dec.recovered_total > 0, "the losses exercise recovery");
        // A corrupt header gives a kept frame another layout, reaching far below the window's first
        // symbol (to symbols long expired); they arrive, and the window moves on while it is kept.
        let newest = *dec.layouts.keys().next_back().unwrap();
        let mut bad = dec.layouts[&newest];
        bad.first -= 200;
        bad.n += 200;
        dec.add_layout(bad);
        assert_missing_consistent(&dec, "after a changed layout");
        for d in bad.data() {
            dec.add_data(d, payload.then(|| data[&d].as_slice()));
        }
        assert_missing_consistent(&dec, "after the changed layout's symbols");
        dec.expire(newest + 2);
        assert!(dec.layouts.contains_key(&newest) && !dec.missing.is_empty());
        assert_missing_consistent(&dec, "after expiring with a changed layout");
    }
}

#[test]
fn a_layout_claiming_more_u_symbols_than_it_has_is_read_without_a_panic() {
    let get = |g: u64| Some(FrameLayout { frame: g, first: 10 * g, n: 4, n_u: 9, ..Default::default() });
    let mut dec = Decoder::new(3, None);
    for g in 0..5 {
        dec.add_layout(get(g).unwrap());
        dec.add_parity(g, g, None);
    }
    // U of frames 1 and 4 as the header names it (nine symbols each), no V.
    let want: Vec<u64> = (10..19).chain(40..49).collect();
    assert_eq!(covered(3, 4, get), Some(want));
    assert!(dec.solve().is_empty());
}

#[test]
fn skipping_empty_frames_leaves_what_laying_them_out_does() {
    for k in 0..12 {
        let mut a = StreamLayout::new(TamburConfig::default());
        a.next(6, 3);
        a.next(5, 0);
        let mut b = a.clone();
        for _ in 0..k {
            a.next_layout(0, 0);
        }
        b.skip_empty(k);
        assert_eq!(a.window().copied().collect::<Vec<_>>(), b.window().copied().collect::<Vec<_>>(), "k = {k}");
        assert_eq!(a.next(4, 2), b.next(4, 2), "k = {k}");
    }
}

#[test]
fn policy_sends_half_parity_for_two_seconds_after_a_loss_report() {
    let mut p = RedundancyPolicy::new(TamburConfig::default());
    let t = |ms: u64| Instant(ms * 1_000_000);
    assert_eq!(p.parity_count(t(0), 9), 0);
    p.on_feedback(t(100), false);
    assert_eq!(p.parity_count(t(100), 9), 0);
    p.on_feedback(t(200), true);
    assert_eq!(p.parity_count(t(200), 9), 5, "ceil(9 / 2)");
    assert_eq!(p.parity_count(t(2200), 10), 5);
    assert_eq!(p.parity_count(t(2201), 10), 0);
}

#[test]
fn bad_config_is_refused_by_name() {
    let c = TamburConfig { tau: 0, ..Default::default() };
    assert!(matches!(c.validate(), Err(TamburError::Invalid { field: "tau", .. })));
    let c = TamburConfig { parity_ratio: -1.0, ..Default::default() };
    assert!(matches!(c.validate(), Err(TamburError::Invalid { field: "parity_ratio", .. })));
}
