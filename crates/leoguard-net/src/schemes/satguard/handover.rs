//! The hook's side of handover-aware buffer migration (§3.2; the protocol is described in
//! `migrate.rs`): starting migrations from the connectivity cache, moving copies, committing at the
//! handover, redirecting late packets, and releasing moved packets at the new satellite.

use super::migrate::{encap_bytes, pack_commit, ranges, unpack_commit, Outgoing, RANGES_PER_COMMIT};
use super::{key, Egress, SatguardHook, SR_COMMIT, SR_COPY, SR_REDIRECT};
use crate::host::Ctx;
use crate::link::LinkId;
use crate::packet::{Packet, NET_CONTROL, NET_HSEQ, NET_MIGRATED, NET_RETX, NET_SR};
use crate::topo::constellation::PlannedHandover;
use leoguard_core::{Bytes, Duration, Instant};

impl SatguardHook {
    /// When the migration for `plan` starts: `buffer_bytes / capacity` of the old downlink before
    /// the handover (§3.2).
    fn migration_start(&self, plan: &PlannedHandover) -> Instant {
        let rate = self.net.rate.get(plan.old_down.0 as usize).copied().unwrap_or_default();
        let lead = rate.transmission_time(Bytes(self.opts.hop.buffer_bytes)).unwrap_or(Duration::ZERO);
        Instant(plan.t.as_nanos().saturating_sub(lead.as_nanos()))
    }

    /// The start time of the next migration this node has to begin.
    pub(super) fn next_migration_start(&self) -> Option<Instant> {
        let &i = self.plans.get(self.next_plan)?;
        self.net.plan(i).map(|p| self.migration_start(p))
    }

    /// Begins every migration due by now: moves the pending packets of the old downlink and copies
    /// what it still sends until the handover.
    pub(super) fn start_migrations(&mut self, ctx: &mut Ctx) {
        let now = ctx.now();
        while let Some(&i) = self.plans.get(self.next_plan) {
            let net = std::sync::Arc::clone(&self.net);
            let Some(plan) = net.plan(i) else { break };
            if self.migration_start(plan) > now {
                break;
            }
            self.next_plan += 1;
            if plan.t < now {
                continue;
            }
            self.stats.migrations += 1;
            self.outgoing.insert(plan.old_down.0, Outgoing { plan: i, ..Default::default() });
            let pending = self.senders.get(&plan.old_down.0).map(|s| s.pending_copies(None)).unwrap_or_default();
            for p in pending {
                self.copy_to_new_satellite(plan.old_down, &p, ctx);
            }
        }
    }

    /// Sends a copy of `p` (just sent, or pending, on `link`) to the satellite taking over.
    pub(super) fn copy_to_new_satellite(&mut self, link: LinkId, p: &Packet, ctx: &mut Ctx) {
        let Some(out) = self.outgoing.get_mut(&link.0) else { return };
        let Some(plan) = self.net.plan(out.plan) else { return };
        let Some(&first) = plan.route.first() else {
            self.stats.migration_unroutable += 1;
            return;
        };
        let m = out.next;
        out.next = m.wrapping_add(1);
        out.moved.insert(key(p), m);
        let mut c = *p;
        c.net.flags = (c.net.flags & !(NET_HSEQ | NET_RETX)) | NET_SR | NET_CONTROL;
        c.net.route = out.plan as u32;
        c.net.segment = 0;
        c.net.sr_kind = SR_COPY;
        c.net.hseq = m;
        c.size += encap_bytes(plan.route.len());
        self.stats.migrated_packets += 1;
        self.stats.migrated_bytes += u64::from(c.size);
        ctx.send_on(first, c);
    }

    /// At the handover: tells the new satellite which moved packets are still unacknowledged.
    pub(super) fn commit(&mut self, out: Outgoing, taken: &[Packet], ctx: &mut Ctx) {
        let mut seqs = Vec::with_capacity(taken.len());
        for p in taken {
            match out.moved.get(&key(p)) {
                Some(&m) => seqs.push(m),
                None => self.stats.migration_missing += 1,
            }
        }
        let Some(plan) = self.net.plan(out.plan) else { return };
        let Some(&first) = plan.route.first() else { return };
        let rs = ranges(seqs);
        let parts: Vec<&[(u16, u16)]> = if rs.is_empty() { vec![&[]] } else { rs.chunks(RANGES_PER_COMMIT).collect() };
        let n = parts.len();
        for (i, part) in parts.into_iter().enumerate() {
            let mut c = Packet {
                dst: plan.to.0,
                sent_at: ctx.now(),
                size: super::commit_bytes(plan.route.len(), part.len()),
                // Transport flags of a commit: 1 on its last part.
                flags: u16::from(i + 1 == n),
                ..Default::default()
            };
            c.net.flags = NET_SR | NET_CONTROL;
            c.net.route = out.plan as u32;
            c.net.sr_kind = SR_COMMIT;
            pack_commit(&mut c, part);
            self.stats.migration_commits += 1;
            ctx.send_on(first, c);
        }
    }

    /// A packet for `link`, which went down in a handover this node was the old satellite of, goes
    /// after the new satellite. False if there is no such handover (or the packet was sent on once).
    pub(super) fn redirect(&mut self, link: LinkId, p: &Packet, ctx: &mut Ctx) -> bool {
        if p.net.flags & NET_MIGRATED != 0 {
            return false;
        }
        let now = ctx.now();
        let net = std::sync::Arc::clone(&self.net);
        let found = self
            .plans
            .iter()
            .rev()
            .filter_map(|&i| net.plan(i).map(|pl| (i, pl)))
            .find(|(_, pl)| pl.old_down == link && pl.t <= now);
        let Some((i, plan)) = found else { return false };
        let Some(&first) = plan.route.first() else { return false };
        let mut c = *p;
        c.net.flags = (c.net.flags & !(NET_HSEQ | NET_RETX)) | NET_SR | NET_MIGRATED;
        c.net.route = i as u32;
        c.net.segment = 0;
        c.net.sr_kind = SR_REDIRECT;
        c.size += encap_bytes(plan.route.len());
        self.stats.redirected += 1;
        ctx.send_on(first, c);
        true
    }

    /// A source-routed packet arrived: on along its route, or handled at its end (the new satellite).
    pub(super) fn on_source_routed(&mut self, p: &Packet, ctx: &mut Ctx) {
        let i = p.net.route as usize;
        let net = std::sync::Arc::clone(&self.net);
        let Some(plan) = net.plan(i) else { return };
        let next = usize::from(p.net.segment) + 1;
        if let Some(&l) = plan.route.get(next) {
            let mut c = *p;
            c.net.segment = next as u16;
            ctx.send_on(l, c);
            return;
        }
        let mut c = *p;
        c.net.flags &= !NET_SR;
        match p.net.sr_kind {
            SR_COPY => {
                c.size = c.size.saturating_sub(encap_bytes(plan.route.len()));
                c.net.flags &= !NET_CONTROL;
                self.inboxes.entry(i).or_default().copies.insert(p.net.hseq, c);
            }
            SR_REDIRECT => {
                c.size = c.size.saturating_sub(encap_bytes(plan.route.len()));
                ctx.resume(c);
            }
            SR_COMMIT => {
                let inbox = self.inboxes.entry(i).or_default();
                inbox.commit.extend(unpack_commit(p));
                if p.flags & 1 != 0 {
                    inbox.committed = true;
                }
                self.try_release(i, ctx);
            }
            _ => {}
        }
    }

    /// Whether a link at this node is up (links start in the state the topology gave them).
    pub(super) fn link_up(&self, link: LinkId) -> bool {
        match self.link_state.get(&link.0) {
            Some(&up) => up,
            None => self.net.initially_up.get(link.0 as usize).copied().unwrap_or(true),
        }
    }

    /// Sends the committed moved packets on the new downlink once it is up (and the commit is in, or
    /// its grace time has passed).
    pub(super) fn try_release(&mut self, i: usize, ctx: &mut Ctx) {
        let net = std::sync::Arc::clone(&self.net);
        let Some(plan) = net.plan(i) else { return };
        if !self.link_up(plan.new_down) {
            return;
        }
        let now = ctx.now();
        let Some(inbox) = self.inboxes.get_mut(&i) else { return };
        if !inbox.committed {
            if inbox.deadline.is_none() {
                inbox.deadline = Some(now + self.opts.commit_grace);
            }
            return;
        }
        let Some(inbox) = self.inboxes.remove(&i) else { return };
        let mut copies = inbox.copies;
        for (a, b) in inbox.commit {
            for m in a..=b {
                match copies.remove(&m) {
                    Some(mut p) => {
                        // Committed packets go out back to back: each one's timer starts as it leaves.
                        let leaves = Egress { busy: &mut self.egress_busy, rate: &self.net.rate }.leaves(
                            plan.new_down,
                            now,
                            p.size,
                        );
                        self.stamp(plan.new_down, &mut p, now, leaves);
                        p.net.flags |= NET_RETX | NET_MIGRATED;
                        self.stats.migrated_retransmissions += 1;
                        ctx.send_on(plan.new_down, p);
                    }
                    None => self.stats.migration_missing += 1,
                }
            }
        }
    }

    /// A link at this node came up: release the inboxes waiting for it.
    pub(super) fn inbox_link_up(&mut self, link: LinkId, ctx: &mut Ctx) {
        let net = std::sync::Arc::clone(&self.net);
        let waiting: Vec<usize> =
            self.inboxes.keys().copied().filter(|&i| net.plan(i).is_some_and(|p| p.new_down == link)).collect();
        for i in waiting {
            self.try_release(i, ctx);
        }
    }

    /// Inboxes whose commit did not come in time release every moved packet.
    pub(super) fn inbox_deadlines(&mut self, ctx: &mut Ctx) {
        let now = ctx.now();
        let due: Vec<usize> =
            self.inboxes.iter().filter(|(_, b)| b.deadline.is_some_and(|d| d <= now)).map(|(&i, _)| i).collect();
        for i in due {
            if let Some(b) = self.inboxes.get_mut(&i) {
                b.commit = ranges(b.copies.keys().copied().collect());
                b.committed = true;
                self.stats.migration_commit_timeouts += 1;
            }
            self.try_release(i, ctx);
        }
    }
}
