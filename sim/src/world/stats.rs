//! The counters of one run.

/// Counters of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Events processed.
    pub steps: u64,
    /// Requests the server applied.
    pub server_ops: u64,
    /// Elections seen.
    pub elections: u64,
    /// Faults injected.
    pub faults: u64,
    /// Stale writes the fenced resource rejected.
    pub fenced_rejections: u64,
    /// Writes the fenced resource accepted.
    pub fenced_writes: u64,
    /// Nodes an operator deleted.
    pub revocations: u64,
    /// Replies a candidate no longer waited for.
    pub stale_replies: u64,
    /// Elections of foreign models (their own belief).
    pub foreign_elections: u64,
    /// Persistent look-alikes an operator created.
    pub lookalikes: u64,
    /// Observers' participant lists compared with the server's queue once
    /// the world was quiet.
    pub observer_checks: u64,
    /// Watch events one session handed to more than one machine (the
    /// server's one watch per session, path and kind, shared).
    pub shared_watches: u64,
    /// Look-alikes candidates skipped (`Notice::PersistentSkipped`).
    pub persistent_skipped: u64,
    /// Runs whose server granted less than the request.
    pub clamped_down: u64,
    /// Runs whose server granted more than the request.
    pub clamped_up: u64,
    /// Cooperative revocation requests written into a revocable holder's node.
    pub revocation_requests: u64,
    /// Requests heard (`Notice::RevocationRequested`), by holders and waiters.
    pub revocations_heard: u64,
    /// Writers that downgraded to readers (`Notice::Downgraded`).
    pub downgrades: u64,
    /// Holds of semaphore permits by nodes asking for more than one.
    pub weighted_holds: u64,
    /// Multi-locks held whole.
    pub multi_lock_holds: u64,
    /// Multi-lock acquisitions given up at their deadline.
    pub multi_lock_give_ups: u64,
    /// Session-timeout bounds a member's answer lowered after the start.
    pub bounds_lowered: u64,
    /// Asks of a start-up machine still on their way when the client
    /// connected (sent again then: their outcome is older than the
    /// connection).
    pub asks_in_flight_at_connection: u64,
    /// The most steps taken at one virtual instant after the first
    /// (`time-advances`' margin).
    pub most_at_one_instant: u64,
    /// Client attempts that failed before a first connection (the start-up
    /// machine retried them).
    pub first_attempts_failed: u64,
    /// Starts the start-up machine gave up on (the client never connected
    /// within the connect timeout).
    pub starts_given_up: u64,
}

impl RunStats {
    /// Adds another run's counters to these.
    pub fn add(&mut self, other: &RunStats) {
        self.steps += other.steps;
        self.server_ops += other.server_ops;
        self.elections += other.elections;
        self.faults += other.faults;
        self.fenced_rejections += other.fenced_rejections;
        self.fenced_writes += other.fenced_writes;
        self.revocations += other.revocations;
        self.stale_replies += other.stale_replies;
        self.foreign_elections += other.foreign_elections;
        self.lookalikes += other.lookalikes;
        self.observer_checks += other.observer_checks;
        self.shared_watches += other.shared_watches;
        self.persistent_skipped += other.persistent_skipped;
        self.clamped_down += other.clamped_down;
        self.clamped_up += other.clamped_up;
        self.revocation_requests += other.revocation_requests;
        self.revocations_heard += other.revocations_heard;
        self.downgrades += other.downgrades;
        self.weighted_holds += other.weighted_holds;
        self.multi_lock_holds += other.multi_lock_holds;
        self.multi_lock_give_ups += other.multi_lock_give_ups;
        self.bounds_lowered += other.bounds_lowered;
        self.asks_in_flight_at_connection += other.asks_in_flight_at_connection;
        self.most_at_one_instant = self.most_at_one_instant.max(other.most_at_one_instant);
        self.first_attempts_failed += other.first_attempts_failed;
        self.starts_given_up += other.starts_given_up;
    }
}

impl std::fmt::Display for RunStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} steps, {} server ops, {} elections (+{} foreign), {} faults, {} revocations, {} fenced writes accepted, {} stale writes rejected, {} stale replies, {} look-alikes ({} skips), {} runs clamped down, {} up, {} revocation requests ({} heard), {} downgrades, {} weighted holds, {} multi-locks held ({} given up), {} bounds lowered after the start ({} asks in flight at a connection), at most {} more steps at one instant, {} first attempts failed ({} starts given up)",
            self.steps,
            self.server_ops,
            self.elections,
            self.foreign_elections,
            self.faults,
            self.revocations,
            self.fenced_writes,
            self.fenced_rejections,
            self.stale_replies,
            self.lookalikes,
            self.persistent_skipped,
            self.clamped_down,
            self.clamped_up,
            self.revocation_requests,
            self.revocations_heard,
            self.downgrades,
            self.weighted_holds,
            self.multi_lock_holds,
            self.multi_lock_give_ups,
            self.bounds_lowered,
            self.asks_in_flight_at_connection,
            self.most_at_one_instant,
            self.first_attempts_failed,
            self.starts_given_up
        )
    }
}
