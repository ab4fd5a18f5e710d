//! SATGUARD on a simulator node: one [`HopSender`] per outgoing link and one [`HopReceiver`] per
//! incoming link (LL-ReTx, §3.1/§3.5), FSeq stamped where a packet enters the network (its first
//! departure), HAcks sent back on the reverse link as link-local control packets, partial traffic
//! processing by Traffic Class (§3.5), and re-homing of a ground node's pending packets onto its new
//! link after a handover (the sender is on the ground, so nothing has to migrate).

use crate::engine::{LinkId, Packet, NET_CONTROL, NET_FSEQ, NET_HSEQ, NET_RETX};
use crate::sim::{Agent, Ctx};
use leoguard_core::{Instant, Seq16};
use leoguard_proto::satguard::hop::{HAck, HopConfig, HopError, HopReceiver, HopSender};
use leoguard_wire::{
    HbhRepr, SatguardFlow, SatguardHack, SatguardHop, IPV6_HEADER_LEN, NEXT_HEADER_NONE, NEXT_HEADER_UDP,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Traffic Class value that marks delay-sensitive traffic (DSCP EF), as on the wire.
pub use leoguard_wire::TC_DELAY_SENSITIVE;

/// Bytes the Hop-by-Hop options header adds to a protected packet: the wire format's header with the
/// HSeq and FSeq options.
fn hbh_bytes() -> u32 {
    let mut h = HbhRepr::new(NEXT_HEADER_UDP);
    h.hop = Some(SatguardHop::default());
    h.flow = Some(SatguardFlow::default());
    h.buffer_len() as u32
}

/// Size of a HAck packet: the IPv6 header plus a Hop-by-Hop header with the HAck option.
fn hack_bytes() -> u32 {
    let mut h = HbhRepr::new(NEXT_HEADER_NONE);
    h.hack = Some(SatguardHack::default());
    (IPV6_HEADER_LEN + h.buffer_len()) as u32
}

/// SATGUARD switches and parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SatguardOptions {
    /// Per-hop sender configuration.
    pub hop: HopConfig,
    /// Process every packet (partial traffic processing off); else only delay-sensitive ones.
    pub process_all: bool,
    /// Duplicate-suppression window of receivers, packets.
    pub dedup_window: usize,
}

impl Default for SatguardOptions {
    fn default() -> Self {
        SatguardOptions { hop: HopConfig::default(), process_all: false, dedup_window: 65_536 }
    }
}

/// Counters of one node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SatguardStats {
    /// Packets stamped with an HSeq on departure (first transmissions).
    pub protected: u64,
    /// Packets passed untouched (not delay-sensitive).
    pub unprotected: u64,
    /// FSeqs stamped (packets entering the network here).
    pub fseq_stamped: u64,
    /// Link-local retransmissions.
    pub retransmissions: u64,
    /// Packets given up after the retry bound.
    pub given_up: u64,
    /// Duplicates dropped by receivers.
    pub duplicates: u64,
    /// HAcks sent and their bytes.
    pub hacks_sent: u64,
    /// Bytes of HAcks sent.
    pub hack_bytes: u64,
    /// Pending packets whose link went down.
    pub orphaned: u64,
    /// Orphans sent again on a new link.
    pub rehomed: u64,
    /// Timer expiries handled.
    pub timer_runs: u64,
}

impl std::ops::AddAssign for SatguardStats {
    fn add_assign(&mut self, o: SatguardStats) {
        // Destructured so that a new counter cannot be forgotten here.
        let SatguardStats {
            protected,
            unprotected,
            fseq_stamped,
            retransmissions,
            given_up,
            duplicates,
            hacks_sent,
            hack_bytes,
            orphaned,
            rehomed,
            timer_runs,
        } = o;
        self.protected += protected;
        self.unprotected += unprotected;
        self.fseq_stamped += fseq_stamped;
        self.retransmissions += retransmissions;
        self.given_up += given_up;
        self.duplicates += duplicates;
        self.hacks_sent += hacks_sent;
        self.hack_bytes += hack_bytes;
        self.orphaned += orphaned;
        self.rehomed += rehomed;
        self.timer_runs += timer_runs;
    }
}

/// The SATGUARD hook of one node.
#[derive(Debug)]
pub struct SatguardHook {
    opts: SatguardOptions,
    /// Reverse direction of every link (HAcks go back on it).
    reverse: Arc<Vec<Option<LinkId>>>,
    senders: BTreeMap<u32, HopSender<Packet>>,
    receivers: BTreeMap<u32, HopReceiver>,
    fseq: BTreeMap<(u32, u32), Seq16>,
    orphans: Vec<Packet>,
    timer_gen: u64,
    armed: Option<Instant>,
    hbh_bytes: u32,
    hack_bytes: u32,
    /// Counters.
    pub stats: SatguardStats,
}

/// A packet's end-to-end identity for duplicate suppression: flow, direction and FSeq (FSeq runs per
/// flow and destination; a flow has two ends, so the low 16 bits of the destination tell them apart).
fn key(p: &Packet) -> u64 {
    (u64::from(p.flow) << 32) | (u64::from(p.dst & 0xFFFF) << 16) | u64::from(p.net.fseq)
}

impl SatguardHook {
    /// A hook with validated options; `reverse[l]` is the link back along link `l`.
    pub fn new(opts: SatguardOptions, reverse: Arc<Vec<Option<LinkId>>>) -> Result<Self, HopError> {
        opts.hop.validate()?;
        Ok(SatguardHook {
            opts,
            reverse,
            senders: BTreeMap::new(),
            receivers: BTreeMap::new(),
            fseq: BTreeMap::new(),
            orphans: Vec::new(),
            timer_gen: 0,
            armed: None,
            hbh_bytes: hbh_bytes(),
            hack_bytes: hack_bytes(),
            stats: SatguardStats::default(),
        })
    }

    fn protected(&self, p: &Packet) -> bool {
        self.opts.process_all || p.net.tc == TC_DELAY_SENSITIVE
    }

    fn sender(&mut self, link: LinkId) -> &mut HopSender<Packet> {
        let cfg = self.opts.hop;
        self.senders.entry(link.0).or_insert_with(|| HopSender::new(cfg).expect("validated in SatguardHook::new"))
    }

    /// Sends the due retransmissions of one sender and counts what it gave up.
    fn pump(s: &mut HopSender<Packet>, link: LinkId, stats: &mut SatguardStats, ctx: &mut Ctx) {
        while let Some(r) = s.poll_retransmit(ctx.now()) {
            let mut p = r.item;
            p.net.hseq = r.hseq.0;
            p.net.flags |= NET_HSEQ | NET_RETX;
            stats.retransmissions += 1;
            ctx.send_on(link, p);
        }
        while s.poll_lost().is_some() {
            stats.given_up += 1;
        }
    }

    fn arm(&mut self, ctx: &mut Ctx) {
        let want = self.senders.values().filter_map(HopSender::poll_timeout).min();
        if want != self.armed {
            self.armed = want;
            self.timer_gen += 1;
            if let Some(t) = want {
                ctx.timer(t, self.timer_gen);
            }
        }
    }
}

impl Agent for SatguardHook {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn start(&mut self, _ctx: &mut Ctx) {}

    fn on_packet(&mut self, _p: &Packet, _ctx: &mut Ctx) {}

    fn on_timer(&mut self, token: u64, ctx: &mut Ctx) {
        if token != self.timer_gen {
            return;
        }
        self.armed = None;
        self.stats.timer_runs += 1;
        for (&l, s) in &mut self.senders {
            s.handle_timeout(ctx.now());
            Self::pump(s, LinkId(l), &mut self.stats, ctx);
        }
        self.arm(ctx);
    }

    fn on_arrive(&mut self, link: LinkId, p: &mut Packet, ctx: &mut Ctx) -> bool {
        if p.net.flags & NET_CONTROL != 0 {
            // A HAck for our sender on the data link it names.
            let data_link = LinkId(p.seq as u32);
            if let Some(s) = self.senders.get_mut(&data_link.0) {
                let hack =
                    HAck { start: Seq16(p.ack as u16), end: Seq16((p.ack >> 16) as u16), beam: (p.ack >> 32) as u16 };
                s.on_hack(ctx.now(), &hack);
                Self::pump(s, data_link, &mut self.stats, ctx);
                self.arm(ctx);
            }
            return false;
        }
        if p.net.flags & NET_HSEQ == 0 {
            return true;
        }
        let window = self.opts.dedup_window;
        let r = self.receivers.entry(link.0).or_insert_with(|| HopReceiver::new(0, window));
        let got = r.on_receive(ctx.now(), Seq16(p.net.hseq), key(p), p.net.flags & NET_RETX != 0);
        p.net.flags &= !(NET_HSEQ | NET_RETX);
        if let Some(back) = self.reverse.get(link.0 as usize).copied().flatten() {
            let h = got.hack;
            ctx.send_on(
                back,
                Packet {
                    flow: p.flow,
                    seq: u64::from(link.0),
                    ack: u64::from(h.start.0) | (u64::from(h.end.0) << 16) | (u64::from(h.beam) << 32),
                    size: self.hack_bytes,
                    dst: u32::MAX,
                    sent_at: ctx.now(),
                    net: crate::engine::NetFields { flags: NET_CONTROL, ..Default::default() },
                    ..Default::default()
                },
            );
            self.stats.hacks_sent += 1;
            self.stats.hack_bytes += u64::from(self.hack_bytes);
        }
        if got.duplicate {
            self.stats.duplicates += 1;
            return false;
        }
        if p.dst == ctx.node().0 && p.net.flags & NET_FSEQ != 0 {
            // Leaving the network here: the options header comes off.
            p.size = p.size.saturating_sub(self.hbh_bytes);
        }
        true
    }

    fn on_depart(&mut self, link: LinkId, p: &mut Packet, ctx: &mut Ctx) -> bool {
        if !self.protected(p) {
            self.stats.unprotected += 1;
            return true;
        }
        if p.net.flags & NET_FSEQ == 0 {
            // Network entry: FSeq per (flow, destination), never changed inside (§3.4).
            let f = self.fseq.entry((p.flow, p.dst)).or_default();
            p.net.fseq = f.0;
            *f = f.next();
            p.net.flags |= NET_FSEQ;
            p.size += self.hbh_bytes;
            self.stats.fseq_stamped += 1;
        }
        let copy = *p;
        let h = self.sender(link).on_send(ctx.now(), copy, p.size, 0);
        p.net.hseq = h.0;
        p.net.flags = (p.net.flags | NET_HSEQ) & !NET_RETX;
        self.stats.protected += 1;
        self.arm(ctx);
        true
    }

    fn on_link_state(&mut self, link: LinkId, up: bool, ctx: &mut Ctx) {
        if !up {
            // Our own link went away (a handover): its pending packets wait for the next link.
            if let Some(s) = self.senders.get_mut(&link.0) {
                let taken = s.take_pending();
                self.stats.orphaned += taken.len() as u64;
                self.orphans.extend(taken.into_iter().map(|(p, _)| p));
            }
        } else if !self.orphans.is_empty() {
            // A link at this node came up (the new satellite after the interruption): hand the orphans
            // on through routing; they get new HSeqs on whichever link now leads to their destination.
            for mut p in std::mem::take(&mut self.orphans) {
                p.net.flags &= !(NET_HSEQ | NET_RETX);
                self.stats.rehomed += 1;
                ctx.resume(p);
            }
        }
        self.arm(ctx);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn header_sizes_come_from_the_wire_format() {
        // docs/satguard.md and docs/wire.md: HSeq + FSeq options in 16 bytes, a HAck packet 56 bytes.
        assert_eq!(super::hbh_bytes(), 16);
        assert_eq!(super::hack_bytes(), 56);
    }
}
