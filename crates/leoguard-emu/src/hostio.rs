//! The data plane's edge: packets entering from the hosts' TUN devices (a read's segments one by one,
//! classified into flows) and leaving to them (queued per host and written coalesced, or written at
//! once on a plain device), with the delivery accounting (timing error, per-flow counters).

use crate::core::Core;
use crate::dataplane::{DataPlane, READ_BATCH, WRITE_HOLD_NS};
use crate::packet;
use crate::plane::{Cause, Meta, NodePlugin, REVERSE, SLOT};
use crate::tunio::Read;
use leoguard_core::Instant;
use leoguard_net::packet::{NetFields, Packet};

impl Core {
    pub(crate) fn deliver(&mut self, slot: u32, t: u64) {
        let Some(h) = self.host_of[self.meta[slot as usize].dst_node as usize] else {
            self.drop_slot(slot, Cause::NoRoute);
            return;
        };
        let off = slot as usize * SLOT;
        // The scheme's header ends where the packet leaves the emulated network.
        let len = crate::hbh::strip(&mut self.bufs[off..off + SLOT], self.meta[slot as usize].len as usize);
        self.meta[slot as usize].len = len as u32;
        let m = self.meta[slot as usize];
        if self.hosts[h].tun.offload() {
            // Queued for the host's next (coalesced) write; its bytes are copied, its slot is free. The
            // clock is read only for a host's first queued packet (the loop reads it once per event).
            let first = self.hosts[h].pending.is_empty();
            let now = if first { self.clock_model() } else { 0 };
            let host = &mut self.hosts[h];
            let pkt = &self.bufs[off..off + m.len as usize];
            // Worth holding: GRO could merge it, and the next packet on its last link arrives within the
            // hold (a paced flow's packets, spaced wider, are written at the end of the pass).
            let mergeable = self.next_arrival.saturating_sub(t) <= WRITE_HOLD_NS
                && crate::tunio::gro_candidate(pkt, host.tun.udp_gso());
            let full = host.tun.send(pkt).unwrap_or(true);
            if first {
                host.hold_since = now;
                self.next_flush = self.next_flush.min(now + WRITE_HOLD_NS);
            }
            host.pending.push((t, m));
            host.urgent |= !mergeable;
            self.release(slot);
            if full {
                self.flush_host(h);
            }
            return;
        }
        // The departure time is when the packet is handed to the host (the write then runs the
        // host's receive path in the kernel, steered to other CPUs by RPS).
        let now = self.clock_model();
        let ok = self.hosts[h].tun.send(&self.bufs[off..off + m.len as usize]).is_ok();
        if !ok {
            self.drop_slot(slot, Cause::TunWrite);
            return;
        }
        self.delivered(t, m, now);
        self.release(slot);
    }

    /// Writes host `h`'s queued deliveries (coalesced) and accounts them at the time of the write.
    pub(crate) fn flush_host(&mut self, h: usize) {
        // A packet's departure is when its write begins, as on a plain device; a batch's later writes
        // begin later by the earlier writes' time, which `offload.flush_us` reports.
        let now = self.clock_model();
        let (n, ok) = self.hosts[h].tun.flush();
        self.report.flush_time.record(self.clock_model().saturating_sub(now));
        let pending = std::mem::take(&mut self.hosts[h].pending);
        debug_assert_eq!(n, pending.len());
        for &(t, m) in &pending {
            if ok {
                self.delivered(t, m, now);
            } else {
                // A failed batch write: its packets are counted as not delivered (the writes after the
                // failing one may have gone through; `tun.failed_writes` says it happened).
                self.count_drop(Cause::TunWrite);
            }
        }
        let mut pending = pending;
        pending.clear();
        self.hosts[h].pending = pending;
        self.hosts[h].urgent = false;
    }

    /// Writes the queued deliveries of every host that is due (its oldest has waited
    /// `WRITE_HOLD_NS`, or it holds a packet GRO would not merge), or of every host with `all`.
    pub(crate) fn flush_due(&mut self, now: u64, all: bool) {
        let mut next = u64::MAX;
        for h in 0..self.hosts.len() {
            let host = &self.hosts[h];
            if host.pending.is_empty() {
                continue;
            }
            if all || host.urgent || now >= host.hold_since + WRITE_HOLD_NS {
                self.flush_host(h);
            } else {
                next = next.min(host.hold_since + WRITE_HOLD_NS);
            }
        }
        self.next_flush = next;
    }

    /// Accounts a packet handed to its host at `now` (model ns), due at `t`.
    fn delivered(&mut self, t: u64, m: Meta, now: u64) {
        let late = now.saturating_sub(t);
        self.report.timing.record(late);
        if late > self.cfg.late_us * 1000 {
            self.report.late += 1;
        }
        self.report.delivered += 1;
        self.report.delivered_bytes += u64::from(m.len);
        if m.flow != 0 {
            let owd = now.saturating_sub(m.t_in);
            let dir = usize::from(m.flow & REVERSE != 0);
            let f = &mut self.report.flows[((m.flow & !REVERSE) - 1) as usize];
            match f.last_delivered[dir] {
                Some(last) if m.entry < last => f.reordered += u64::from(dir == 0),
                _ => f.last_delivered[dir] = Some(m.entry),
            }
            if m.flow & REVERSE == 0 {
                f.delivered += 1;
                f.delivered_bytes += u64::from(m.len);
                f.owd.record(owd);
            } else {
                f.rev_delivered += 1;
                f.rev_owd.record(owd);
            }
        }
    }

    pub(crate) fn classify(&self, src_node: u32, dst_node: u32, h: &packet::Header) -> u32 {
        for (i, f) in self.flows.iter().enumerate() {
            if f.proto != h.proto {
                continue;
            }
            if f.src == src_node && f.dst == dst_node && (f.port == 0 || f.port == h.dport) {
                return i as u32 + 1;
            }
            if f.dst == src_node && f.src == dst_node && (f.port == 0 || f.port == h.sport) {
                return (i as u32 + 1) | REVERSE;
            }
        }
        0
    }

    /// The id per-hop schemes key a packet's flow by: each configured flow's two directions, then one
    /// per other 5-tuple, in order of first sight.
    pub(crate) fn flow_id(&mut self, flow: u32, src: u32, dst: u32, h: &packet::Header) -> u32 {
        if flow != 0 {
            return 2 * ((flow & !REVERSE) - 1) + u32::from(flow & REVERSE != 0);
        }
        let base = 2 * self.flows.len() as u32;
        let n = self.extra_flows.len() as u32;
        *self.extra_flows.entry((src, dst, h.proto, h.sport, h.dport)).or_insert(base + n)
    }
}

impl DataPlane {
    /// Reads what waits on host `hi`'s TUN (up to a batch of reads; a super-packet's segments enter
    /// one by one) and sends each packet on its way.
    pub(crate) fn read_host(&mut self, hi: usize) -> bool {
        for _ in 0..READ_BATCH {
            let n = match self.core.hosts[hi].tun.recv() {
                Read::Empty => return false,
                Read::Refused(cause) => {
                    self.core.report.entered += 1;
                    self.core.count_drop(cause);
                    continue;
                }
                Read::Packets(n) => n,
            };
            let t = self.run_due(self.core.clock_model());
            for i in 0..n {
                self.enter(hi, i, t);
            }
        }
        true
    }

    /// Packet `i` of host `hi`'s last read enters the network at model time `t`.
    fn enter(&mut self, hi: usize, i: usize, t: u64) {
        self.core.report.entered += 1;
        let n = self.core.hosts[hi].tun.packet(i).len();
        if n >= SLOT {
            self.core.count_drop(Cause::TooBig);
            return;
        }
        // Dropped at the door (`pool_exhausted`), so the TUN queue does not stall the host silently.
        let Some(slot) = self.core.alloc() else { return };
        let off = slot as usize * SLOT;
        self.core.bufs[off..off + n].copy_from_slice(self.core.hosts[hi].tun.packet(i));
        let Some(h) = packet::parse(&self.core.bufs[off..off + n]) else {
            self.core.drop_slot(slot, Cause::Malformed);
            return;
        };
        if h.multicast {
            self.core.drop_slot(slot, Cause::Multicast);
            return;
        }
        let Some(&dst) = self.core.addr_node.get(&h.dst) else {
            self.core.drop_slot(slot, Cause::UnknownDst);
            return;
        };
        let src = self.core.hosts[hi].node;
        let flow = self.core.classify(src, dst, &h);
        let mut entry = 0;
        if flow != 0 {
            let f = &mut self.core.report.flows[((flow & !REVERSE) - 1) as usize];
            if flow & REVERSE == 0 {
                entry = f.sent;
                f.sent += 1;
            } else {
                entry = f.rev_sent;
                f.rev_sent += 1;
            }
        }
        self.core.meta[slot as usize] = Meta { len: n as u32, t_in: t, dst_node: dst, entry, flow, fields_only: false };
        let id = self.core.flow_id(flow, src, dst, &h);
        if let Some(mark) = (flow != 0).then(|| self.core.flows[((flow & !REVERSE) - 1) as usize].mark_tc).flatten() {
            if h.v6 {
                let _ = leoguard_wire::write_traffic_class(&mut self.core.bufs[off..off + n], mark);
            }
        }
        let tc = if h.v6 { ((self.core.bufs[off] & 0x0f) << 4) | (self.core.bufs[off + 1] >> 4) } else { 0 };
        self.core.pkts[slot as usize] = Packet {
            flow: id,
            seq: entry,
            size: n as u32,
            dst,
            sent_at: Instant(t),
            net: NetFields { tc, ..Default::default() },
            ..Default::default()
        };
        self.schemes.on_enter(&mut self.core, slot, t);
        self.forward(src, slot, t, true);
    }
}
