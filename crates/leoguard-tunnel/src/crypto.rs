//! Datagram protection between the two tunnel ends: AEAD framing, nonces, sessions, replay window.
//!
//! Every datagram on the wire is `header (20 bytes) || ciphertext || tag (16 bytes)`:
//!
//! ```text
//! 0        1        2                4                               12                              20
//! +--------+--------+----------------+-------------------------------+-------------------------------+
//! | magic  | kind   | salt (u16)     | session (u64, big endian)     | counter (u64, big endian)     |
//! +--------+--------+----------------+-------------------------------+-------------------------------+
//! ```
//!
//! The AEAD is XChaCha20-Poly1305 (draft-irtf-cfrg-xchacha-03): ChaCha20-Poly1305 (RFC 8439) under a
//! subkey that HChaCha20 derives from the pre-shared key and the first 16 nonce bytes. The nonce is
//! `salt || session || counter || 0^6`, so every (sender session, counter) pair gets its own ChaCha20
//! key stream. The header is the associated data: kind, salt, session and counter travel in clear but
//! cannot be altered. A sender picks a fresh [`Session`] at start (session = wall-clock milliseconds
//! << 16 | 16 random bits, salt = 16 more random bits), so a restart never reuses a nonce even though
//! the counter starts again at 0, and the two ends (which share the key) do not collide because they
//! pick their sessions independently (a collision needs the same millisecond and the same 32 random
//! bits; a datagram carrying the receiver's own session is also refused as a reflection).

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

/// First header byte ("L").
pub const MAGIC: u8 = 0x4c;
/// Header length in bytes.
pub const HEADER_LEN: usize = 20;
/// Poly1305 tag length in bytes.
pub const TAG_LEN: usize = 16;
/// Bytes a sealed datagram adds to its payload.
pub const OVERHEAD: usize = HEADER_LEN + TAG_LEN;
/// Replay window in packets (a multiple of 64).
pub const REPLAY_WINDOW: u64 = 2048;

/// What a datagram carries (the header's `kind` byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// One IP packet, no coding (the tunnel with `fec.mode = "off"`).
    Plain,
    /// A liquid source or repair symbol (Encoder -> Decoder).
    Data,
    /// Liquid feedback (Decoder -> Encoder).
    Feedback,
}

impl Kind {
    fn to_byte(self) -> u8 {
        match self {
            Kind::Plain => 0,
            Kind::Data => 1,
            Kind::Feedback => 2,
        }
    }
    fn from_byte(b: u8) -> Option<Kind> {
        match b {
            0 => Some(Kind::Plain),
            1 => Some(Kind::Data),
            2 => Some(Kind::Feedback),
            _ => None,
        }
    }
}

/// A sender's session: `id` orders sessions in time (a restarted end has a larger one), `salt` is
/// extra randomness that only separates nonces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Session {
    /// Wall-clock milliseconds << 16 | 16 random bits.
    pub id: u64,
    /// 16 random bits.
    pub salt: u16,
}

impl From<u64> for Session {
    fn from(id: u64) -> Session {
        Session { id, salt: 0 }
    }
}

/// Why an incoming datagram was dropped (each has its own counter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reject {
    /// Shorter than header + tag, wrong magic or unknown kind.
    Malformed,
    /// The tag did not verify: forged, corrupted, or sealed under another key.
    BadTag,
    /// Counter already seen, or older than the replay window.
    Replay,
    /// Carries a session older than the peer's current one (a replay from an earlier run).
    StaleSession,
    /// Carries our own sending session: one of our datagrams reflected back at us.
    Reflected,
}

/// A parsed, not yet authenticated, header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Payload type.
    pub kind: Kind,
    /// Sender session.
    pub session: Session,
    /// Sender packet counter.
    pub counter: u64,
}

impl Header {
    /// Parse the first [`HEADER_LEN`] bytes.
    pub fn parse(buf: &[u8]) -> Result<Header, Reject> {
        if buf.len() < HEADER_LEN + TAG_LEN || buf[0] != MAGIC {
            return Err(Reject::Malformed);
        }
        let kind = Kind::from_byte(buf[1]).ok_or(Reject::Malformed)?;
        let salt = u16::from_be_bytes([buf[2], buf[3]]);
        let id = u64::from_be_bytes(buf[4..12].try_into().map_err(|_| Reject::Malformed)?);
        let session = Session { id, salt };
        let counter = u64::from_be_bytes(buf[12..20].try_into().map_err(|_| Reject::Malformed)?);
        Ok(Header { kind, session, counter })
    }

    /// Write the header into `out[..HEADER_LEN]`.
    pub fn emit(&self, out: &mut [u8]) {
        out[0] = MAGIC;
        out[1] = self.kind.to_byte();
        out[2..4].copy_from_slice(&self.session.salt.to_be_bytes());
        out[4..12].copy_from_slice(&self.session.id.to_be_bytes());
        out[12..20].copy_from_slice(&self.counter.to_be_bytes());
    }

    fn nonce(&self) -> XNonce {
        let mut n = [0u8; 24];
        n[..2].copy_from_slice(&self.session.salt.to_be_bytes());
        n[2..10].copy_from_slice(&self.session.id.to_be_bytes());
        n[10..18].copy_from_slice(&self.counter.to_be_bytes());
        XNonce::from(n)
    }
}

/// Sliding anti-replay window over 64-bit counters (RFC 4303 §3.4.3 / RFC 6479 style bitmap).
#[derive(Clone, Debug)]
pub struct ReplayWindow {
    /// Highest counter accepted so far plus one (0 = nothing accepted yet).
    top: u64,
    bits: [u64; (REPLAY_WINDOW / 64) as usize],
}

impl Default for ReplayWindow {
    fn default() -> Self {
        ReplayWindow { top: 0, bits: [0; (REPLAY_WINDOW / 64) as usize] }
    }
}

impl ReplayWindow {
    fn slot(counter: u64) -> (usize, u64) {
        let idx = (counter % REPLAY_WINDOW) as usize;
        (idx / 64, 1u64 << (idx % 64))
    }

    /// Would `counter` be accepted? (Checked before the costly tag verification; no state change.)
    pub fn check(&self, counter: u64) -> bool {
        if counter == u64::MAX {
            return false;
        }
        if counter >= self.top {
            return true;
        }
        if self.top - counter > REPLAY_WINDOW {
            return false;
        }
        let (w, b) = Self::slot(counter);
        self.bits[w] & b == 0
    }

    /// Record `counter` as seen (only after the datagram authenticated). Returns false on a replay.
    pub fn update(&mut self, counter: u64) -> bool {
        if !self.check(counter) {
            return false;
        }
        if counter >= self.top {
            // Clear the slots the window slides over: counters top..=counter are new.
            let advance = counter + 1 - self.top;
            if advance >= REPLAY_WINDOW {
                self.bits = [0; (REPLAY_WINDOW / 64) as usize];
            } else {
                for c in self.top..=counter {
                    let (w, b) = Self::slot(c);
                    self.bits[w] &= !b;
                }
            }
            self.top = counter + 1;
        }
        let (w, b) = Self::slot(counter);
        self.bits[w] |= b;
        true
    }
}

/// The sending half: seals payloads under our session with a strictly increasing counter.
pub struct Sealer {
    aead: XChaCha20Poly1305,
    session: Session,
    counter: u64,
}

impl Sealer {
    /// A sealer for `session` (see the module doc for how a session is chosen).
    pub fn new(key: &[u8; 32], session: impl Into<Session>) -> Sealer {
        Sealer { aead: XChaCha20Poly1305::new(key.into()), session: session.into(), counter: 0 }
    }

    /// Our session.
    pub fn session(&self) -> Session {
        self.session
    }

    /// Seal `payload` as a datagram of `kind`. `None` once the 2^64-1 counter space is spent (never in
    /// practice: 10^9 datagrams per second for 584 years).
    pub fn seal(&mut self, kind: Kind, payload: &[u8]) -> Option<Vec<u8>> {
        if self.counter == u64::MAX {
            return None;
        }
        let hdr = Header { kind, session: self.session, counter: self.counter };
        self.counter += 1;
        let mut out = vec![0u8; HEADER_LEN];
        hdr.emit(&mut out);
        // Encryption only fails for payloads beyond the cipher's 256 GiB limit; datagrams are < 64 KiB.
        let ct = self.aead.encrypt(&hdr.nonce(), Payload { msg: payload, aad: &out[..HEADER_LEN] }).ok()?;
        out.extend_from_slice(&ct);
        Some(out)
    }
}

/// The receiving half: authenticates datagrams from the peer and drops replays.
pub struct Opener {
    aead: XChaCha20Poly1305,
    own_session: Session,
    /// The peer's current session and its replay window (None until the first valid datagram).
    peer: Option<(Session, ReplayWindow)>,
}

impl Opener {
    /// An opener; `own_session` is our Sealer's session (to recognise reflections).
    pub fn new(key: &[u8; 32], own_session: impl Into<Session>) -> Opener {
        Opener { aead: XChaCha20Poly1305::new(key.into()), own_session: own_session.into(), peer: None }
    }

    /// The peer's current session, if one has been seen.
    pub fn peer_session(&self) -> Option<Session> {
        self.peer.as_ref().map(|p| p.0)
    }

    /// Authenticate and decrypt one datagram. A newer peer session (the peer restarted) replaces the
    /// old one only once a datagram of it has authenticated; older sessions are refused.
    pub fn open(&mut self, datagram: &[u8]) -> Result<(Kind, Vec<u8>), Reject> {
        let hdr = Header::parse(datagram)?;
        if hdr.session == self.own_session {
            return Err(Reject::Reflected);
        }
        match &self.peer {
            Some((s, _)) if hdr.session < *s => return Err(Reject::StaleSession),
            Some((s, w)) if hdr.session == *s && !w.check(hdr.counter) => return Err(Reject::Replay),
            _ => {}
        }
        let pt = self
            .aead
            .decrypt(&hdr.nonce(), Payload { msg: &datagram[HEADER_LEN..], aad: &datagram[..HEADER_LEN] })
            .map_err(|_| Reject::BadTag)?;
        match &mut self.peer {
            Some((s, w)) if *s == hdr.session => {
                if !w.update(hdr.counter) {
                    return Err(Reject::Replay);
                }
            }
            _ => {
                let mut w = ReplayWindow::default();
                w.update(hdr.counter);
                self.peer = Some((hdr.session, w));
            }
        }
        Ok((hdr.kind, pt))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: [u8; 32] = [7u8; 32];

    #[test]
    fn header_bytes_both_ways() {
        let h = Header {
            kind: Kind::Feedback,
            session: Session { id: 0x0102_0304_0506_0708, salt: 0xa1b2 },
            counter: 0x1122,
        };
        let mut b = [0u8; HEADER_LEN + TAG_LEN];
        h.emit(&mut b);
        assert_eq!(&b[..HEADER_LEN], &[0x4c, 2, 0xa1, 0xb2, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0x11, 0x22]);
        assert_eq!(Header::parse(&b), Ok(h));
        b[1] = 3;
        assert_eq!(Header::parse(&b), Err(Reject::Malformed));
        assert_eq!(Header::parse(&b[..HEADER_LEN + TAG_LEN - 1]), Err(Reject::Malformed));
    }

    #[test]
    fn seal_open_round_trip_and_overhead() {
        let mut s = Sealer::new(&K, 10);
        let mut o = Opener::new(&K, 20);
        let d = s.seal(Kind::Data, b"hello").expect("seal");
        assert_eq!(d.len(), 5 + OVERHEAD);
        assert_eq!(o.open(&d), Ok((Kind::Data, b"hello".to_vec())));
        assert_eq!(o.peer_session(), Some(10.into()));
    }

    #[test]
    fn rejects_forgery_truncation_wrong_key_replay_reflection() {
        let mut s = Sealer::new(&K, 10);
        let mut o = Opener::new(&K, 20);
        let d = s.seal(Kind::Plain, b"payload").expect("seal");
        // Every single-bit flip anywhere (header included) is caught.
        for i in 0..d.len() {
            let mut f = d.clone();
            f[i] ^= 0x01;
            assert!(o.open(&f).is_err(), "bit flip at {i} accepted");
        }
        assert_eq!(o.open(&d[..d.len() - 1]), Err(Reject::BadTag));
        assert_eq!(o.open(&d[..HEADER_LEN]), Err(Reject::Malformed));
        let mut other = Sealer::new(&[8u8; 32], 10);
        assert_eq!(o.open(&other.seal(Kind::Plain, b"x").expect("seal")), Err(Reject::BadTag));
        assert!(o.open(&d).is_ok());
        assert_eq!(o.open(&d), Err(Reject::Replay));
        // Our own datagrams reflected back.
        let mut me = Sealer::new(&K, 20);
        assert_eq!(o.open(&me.seal(Kind::Plain, b"x").expect("seal")), Err(Reject::Reflected));
    }

    #[test]
    fn peer_restart_moves_forward_only() {
        let mut old = Sealer::new(&K, 100);
        let mut o = Opener::new(&K, 1);
        let a = old.seal(Kind::Data, b"a").expect("seal");
        let b = old.seal(Kind::Data, b"b").expect("seal");
        assert!(o.open(&a).is_ok());
        let mut new = Sealer::new(&K, 200);
        assert!(o.open(&new.seal(Kind::Data, b"c").expect("seal")).is_ok());
        assert_eq!(o.peer_session(), Some(200.into()));
        // A datagram from the earlier run, even one never delivered, is now refused.
        assert_eq!(o.open(&b), Err(Reject::StaleSession));
        // A forged newer session does not move the session (tag fails first).
        let mut forged = new.seal(Kind::Data, b"d").expect("seal");
        forged[4] = 0xff;
        assert_eq!(o.open(&forged), Err(Reject::BadTag));
        assert_eq!(o.peer_session(), Some(200.into()));
        // Same time-ordered id, different salt: a different session (no shared nonces); the larger wins.
        let mut twin = Sealer::new(&K, Session { id: 200, salt: 1 });
        assert!(o.open(&twin.seal(Kind::Data, b"e").expect("seal")).is_ok());
        assert_eq!(o.peer_session(), Some(Session { id: 200, salt: 1 }));
    }

    #[test]
    fn replay_window_hand_cases() {
        let mut w = ReplayWindow::default();
        assert!(w.update(5));
        assert!(!w.update(5));
        assert!(w.update(3));
        assert!(w.update(4000));
        // The window holds the 2048 counters 1953..=4000.
        assert!(!w.check(1952));
        assert!(w.check(1953));
        assert!(!w.check(5));
        assert!(w.update(3999));
        assert!(!w.update(3999));
        assert!(!w.update(4000));
        // A jump beyond the window clears it entirely.
        assert!(w.update(10_000));
        assert!(w.update(9000));
        assert!(!w.check(u64::MAX));
    }

    #[test]
    fn replay_window_matches_a_set_model() {
        use leoguard_core::stream;
        let mut rng = stream(1, "replay");
        let mut w = ReplayWindow::default();
        let mut seen = std::collections::BTreeSet::new();
        let mut top = 0u64;
        for _ in 0..20_000 {
            let c = (top + rng.next_u64() % 64).saturating_sub(rng.next_u64() % 3000);
            let fresh = !seen.contains(&c) && (c >= top || top - c <= REPLAY_WINDOW);
            assert_eq!(w.update(c), fresh, "counter {c} top {top}");
            if fresh {
                seen.insert(c);
                top = top.max(c + 1);
            }
        }
    }

    proptest::proptest! {
        /// Arbitrary bytes (a fuzz substitute that runs in `cargo test`): never a panic, never accepted,
        /// and a valid datagram with any byte range overwritten is never accepted either.
        #[test]
        fn arbitrary_input_is_rejected(junk in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
                                       at in 0usize..60, len in 1usize..8) {
            let mut o = Opener::new(&K, 1);
            let mut junk2 = junk.clone();
            if junk2.len() >= HEADER_LEN + TAG_LEN {
                junk2[0] = MAGIC;
                junk2[1] = 1;
                junk2[2] = 0;
                junk2[3] = 0;
            }
            proptest::prop_assert!(o.open(&junk).is_err());
            proptest::prop_assert!(o.open(&junk2).is_err());
            let mut s = Sealer::new(&K, 9);
            let good = s.seal(Kind::Data, &[0u8; 24]).expect("seal");
            let mut bad = good.clone();
            for (i, b) in bad.iter_mut().enumerate().skip(at).take(len) {
                *b ^= junk.get(i).copied().unwrap_or(0x5a) | 1;
            }
            proptest::prop_assert!(o.open(&bad).is_err());
            proptest::prop_assert!(o.open(&good).is_ok());
        }
    }
}
