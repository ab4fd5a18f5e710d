//! SATGUARD's counters: per node (summed over the run) and per link (one row per hop sender).

/// Counters of one node (or, summed, of the whole network).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SatguardStats {
    /// Packets stamped with an HSeq on departure (first transmissions on a hop).
    pub protected: u64,
    /// Packets passed untouched (not delay-sensitive).
    pub unprotected: u64,
    /// FSeqs stamped (packets entering the network here).
    pub fseq_stamped: u64,
    /// Link-local retransmissions.
    pub retransmissions: u64,
    /// Losses found by HAck discontinuity.
    pub gap_losses: u64,
    /// Losses found by a timer expiry (beam timers or the fixed timer).
    pub timer_losses: u64,
    /// Packets given up after the retry bound.
    pub given_up: u64,
    /// Pending packets evicted from a full Tx buffer.
    pub evicted: u64,
    /// Largest Tx buffer occupancy of any one hop, bytes.
    pub max_buffer_bytes: u64,
    /// Duplicates dropped by hop receivers.
    pub duplicates: u64,
    /// HAcks sent.
    pub hacks_sent: u64,
    /// Bytes of HAcks sent.
    pub hack_bytes: u64,
    /// HAcks a sender ignored (outside its window).
    pub hacks_ignored: u64,
    /// Pending packets whose link went down.
    pub taken_at_link_down: u64,
    /// Of those, lost with the link (a satellite without migration).
    pub lost_at_link_down: u64,
    /// Pending packets of a ground node's old uplink re-sent on its new link.
    pub rehomed: u64,
    /// Packets held for a link down in a handover.
    pub parked: u64,
    /// Held packets dropped because the hold buffer was full.
    pub parked_dropped: u64,
    /// Migrations started (§3.2).
    pub migrations: u64,
    /// Packets moved to a new satellite.
    pub migrated_packets: u64,
    /// Bytes moved, with their encapsulation.
    pub migrated_bytes: u64,
    /// Migration commits sent.
    pub migration_commits: u64,
    /// Moved packets the new satellite sent on its link.
    pub migrated_retransmissions: u64,
    /// Committed packets the new satellite did not have (their copy was lost or never made).
    pub migration_missing: u64,
    /// Migrations whose commit did not arrive in time (every moved packet was sent).
    pub migration_commit_timeouts: u64,
    /// Packets not moved because no ISL route to the new satellite was known.
    pub migration_unroutable: u64,
    /// Packets that reached the old satellite after its handover, sent on to the new one.
    pub redirected: u64,
    /// Voids sent for FSeq-stamped packets dropped by congestion here.
    pub voids_sent: u64,
    /// Voids that reached the exit's reorder buffer.
    pub exit_voids: u64,
    /// Duplicates dropped where packets leave the network.
    pub exit_duplicates: u64,
    /// Packets held by the reorder buffer.
    pub exit_held: u64,
    /// Packets the reorder buffer had given up waiting for (dropped on arrival).
    pub exit_late: u64,
    /// Packets out of the reorder window.
    pub exit_out_of_window: u64,
    /// Missing FSeqs the reorder buffer gave up on.
    pub exit_skipped: u64,
    /// Gaps the reorder buffer saw closed.
    pub exit_recovered: u64,
    /// Longest time a packet was held, ns.
    pub exit_max_hold_ns: u64,
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
            gap_losses,
            timer_losses,
            given_up,
            evicted,
            max_buffer_bytes,
            duplicates,
            hacks_sent,
            hack_bytes,
            hacks_ignored,
            taken_at_link_down,
            lost_at_link_down,
            rehomed,
            parked,
            parked_dropped,
            migrations,
            migrated_packets,
            migrated_bytes,
            migration_commits,
            migrated_retransmissions,
            migration_missing,
            migration_commit_timeouts,
            migration_unroutable,
            redirected,
            voids_sent,
            exit_voids,
            exit_duplicates,
            exit_held,
            exit_late,
            exit_out_of_window,
            exit_skipped,
            exit_recovered,
            exit_max_hold_ns,
            timer_runs,
        } = o;
        self.protected += protected;
        self.unprotected += unprotected;
        self.fseq_stamped += fseq_stamped;
        self.retransmissions += retransmissions;
        self.gap_losses += gap_losses;
        self.timer_losses += timer_losses;
        self.given_up += given_up;
        self.evicted += evicted;
        self.max_buffer_bytes = self.max_buffer_bytes.max(max_buffer_bytes);
        self.duplicates += duplicates;
        self.hacks_sent += hacks_sent;
        self.hack_bytes += hack_bytes;
        self.hacks_ignored += hacks_ignored;
        self.taken_at_link_down += taken_at_link_down;
        self.lost_at_link_down += lost_at_link_down;
        self.rehomed += rehomed;
        self.parked += parked;
        self.parked_dropped += parked_dropped;
        self.migrations += migrations;
        self.migrated_packets += migrated_packets;
        self.migrated_bytes += migrated_bytes;
        self.migration_commits += migration_commits;
        self.migrated_retransmissions += migrated_retransmissions;
        self.migration_missing += migration_missing;
        self.migration_commit_timeouts += migration_commit_timeouts;
        self.migration_unroutable += migration_unroutable;
        self.redirected += redirected;
        self.voids_sent += voids_sent;
        self.exit_voids += exit_voids;
        self.exit_duplicates += exit_duplicates;
        self.exit_held += exit_held;
        self.exit_late += exit_late;
        self.exit_out_of_window += exit_out_of_window;
        self.exit_skipped += exit_skipped;
        self.exit_recovered += exit_recovered;
        self.exit_max_hold_ns = self.exit_max_hold_ns.max(exit_max_hold_ns);
        self.timer_runs += timer_runs;
    }
}

/// One hop sender's counters (a directed link of the satellite network).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HopRow {
    /// Sending node.
    pub from: u32,
    /// Receiving node.
    pub to: u32,
    /// Whether it is a one-to-many user downlink (beam timers).
    pub user_link: bool,
    /// Packets stamped (first transmissions).
    pub sent: u64,
    /// Retransmissions.
    pub retransmissions: u64,
    /// Losses found by HAck discontinuity.
    pub gap_losses: u64,
    /// Losses found by timers.
    pub timer_losses: u64,
    /// Given up after the retry bound.
    pub given_up: u64,
    /// Evicted from a full buffer.
    pub evicted: u64,
    /// Taken out when the link went down.
    pub taken: u64,
    /// HAcks received.
    pub hacks: u64,
    /// HAcks ignored (outside the window).
    pub hacks_ignored: u64,
    /// Largest buffer occupancy, bytes.
    pub max_buffer_bytes: u64,
}
