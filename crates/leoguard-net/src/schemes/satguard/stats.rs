//! SATGUARD's counters: per node (summed over the run) and per link (one row per hop sender).

counters! {
    /// Counters of one node (or, summed, of the whole network).
    pub struct SatguardStats {
        /// Packets stamped with an HSeq on departure (first transmissions on a hop).
        protected,
        /// Packets passed untouched (not delay-sensitive).
        unprotected,
        /// FSeqs stamped (packets entering the network here).
        fseq_stamped,
        /// Link-local retransmissions.
        retransmissions,
        /// Losses found by HAck discontinuity.
        gap_losses,
        /// Losses found by a timer expiry (beam timers or the fixed timer).
        timer_losses,
        /// Packets given up after the retry bound.
        given_up,
        /// Pending packets evicted from a full Tx buffer.
        evicted,
        /// Duplicates dropped by hop receivers.
        duplicates,
        /// HAcks sent.
        hacks_sent,
        /// Bytes of HAcks sent.
        hack_bytes,
        /// HAcks a sender ignored (outside its window).
        hacks_ignored,
        /// Pending packets whose link went down.
        taken_at_link_down,
        /// Of those, lost with the link (a satellite without migration).
        lost_at_link_down,
        /// Pending packets of a ground node's old uplink re-sent on its new link.
        rehomed,
        /// Packets held for a link down in a handover, or behind held packets still going out.
        parked,
        /// Held packets handed back to routing, paced at the rate of the link that came up.
        unparked,
        /// Held packets dropped because the hold buffer was full.
        parked_dropped,
        /// Migrations started (§3.2).
        migrations,
        /// Packets moved to a new satellite.
        migrated_packets,
        /// Bytes moved, with their encapsulation.
        migrated_bytes,
        /// Migration commits sent.
        migration_commits,
        /// Moved packets the new satellite sent on its link.
        migrated_retransmissions,
        /// Committed packets the new satellite did not have (their copy was lost or never made).
        migration_missing,
        /// Migrations whose commit did not arrive in time (every moved packet was sent).
        migration_commit_timeouts,
        /// Packets not moved because no ISL route to the new satellite was known.
        migration_unroutable,
        /// Packets that reached the old satellite after its handover, sent on to the new one.
        redirected,
        /// Voids sent for FSeq-stamped packets dropped by congestion here.
        voids_sent,
        /// Voids that reached the exit's reorder buffer.
        exit_voids,
        /// Duplicates dropped where packets leave the network.
        exit_duplicates,
        /// Packets held by the reorder buffer.
        exit_held,
        /// Packets the reorder buffer had given up waiting for (dropped on arrival).
        exit_late,
        /// Packets out of the reorder window.
        exit_out_of_window,
        /// Missing FSeqs the reorder buffer gave up on.
        exit_skipped,
        /// Gaps the reorder buffer saw closed.
        exit_recovered,
        /// Handover interruptions during which the exit's reorder holds stood still.
        exit_pauses,
        /// Timer expiries handled.
        timer_runs,
        ; // the largest of all nodes, not a sum
        /// Largest Tx buffer occupancy of any one hop, bytes.
        max_buffer_bytes,
        /// Longest time a packet was held, ns.
        exit_max_hold_ns,
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
    /// The sender's counters.
    pub sender: leoguard_proto::satguard::hop::HopSenderStats,
}
