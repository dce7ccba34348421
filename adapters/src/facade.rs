//! The machines' counters, leader gauge and latency histograms through the
//! [`metrics`] facade, labelled by path. Told a turn late, never on the
//! path between a release and its delete or a takeover and its holder
//! being told (see `Hub::unmirrored`).

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use metrics::SharedString;

use tokio::time::Instant;
use zkelect_core::{MachineId, Notice};

use crate::clock::Clock;
use crate::status::Metrics;

/// One thing a metered machine has to tell the metrics facade.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Mirror {
    /// Its counters moved from these values to the status's.
    Counters(Metrics),
    /// `zkelect_leader` is now this.
    Leader(f64),
    /// A sample of this histogram.
    Histogram(&'static str, Duration),
}

/// Files a metered machine's counters from before they moved, to be
/// mirrored on the pump's next turn (see `Hub`'s `unmirrored`). A
/// machine's counters move in runs, so a repeat of the last entry is left
/// out; any other repeat only mirrors a value twice.
pub(crate) fn note_moved(
    unmirrored: &mut Vec<(MachineId, Mirror)>,
    key: MachineId,
    before: Option<Metrics>,
) {
    if let Some(before) = before {
        if !matches!(unmirrored.last(), Some((k, Mirror::Counters(_))) if *k == key) {
            unmirrored.push((key, Mirror::Counters(before)));
        }
    }
}

/// The election's metrics through the [`metrics`] facade, labelled with the
/// election path: the [`Metrics`] counters under `zkelect_*_total`, a
/// `zkelect_leader` gauge, and three latency histograms in seconds. Without
/// an installed recorder every handle is a no-op.
///
/// - `zkelect_time_to_elect_seconds`: from this candidate's node joining the
///   queue to its election.
/// - `zkelect_failover_seconds`: from the moment this candidate saw the
///   leader gone (no leader, its own demotion, or lost contact) to the moment
///   it saw another leader; 0 when one notice reported both.
/// - `zkelect_handoff_seconds`: from this candidate's own demotion (resign,
///   revoke, loss) to the moment it saw its successor lead.
pub(crate) struct Facade {
    /// When our node joined the queue, until it is elected.
    joined_at: Option<Moment>,
    /// When we were demoted, until another leader is seen.
    demoted_at: Option<Moment>,
    /// When the leader was last seen gone, until another one is seen.
    leader_lost_at: Option<Moment>,
    /// The last leader seen (a failover is a change from one to another).
    last_leader: Option<LeaderSeen>,
}

/// Reads one counter of a [`Metrics`].
type Counter = fn(&Metrics) -> u64;

/// Every counter series: its name, and its value in [`Metrics`]. Their
/// handles are fetched when a value moves, not kept: 16 bytes a handle
/// would cost every idle machine more than a fetch costs a busy one.
const COUNTERS: [(&str, Counter); 14] = [
    ("zkelect_elections_total", |m| m.elections),
    ("zkelect_demotions_total", |m| m.demotions),
    ("zkelect_failovers_total", |m| m.failovers),
    ("zkelect_leader_changes_total", |m| m.leader_changes),
    ("zkelect_ops_total", |m| m.ops),
    ("zkelect_op_errors_total", |m| m.op_errors),
    ("zkelect_op_timeouts_total", |m| m.op_timeouts),
    ("zkelect_stale_replies_total", |m| m.stale_replies),
    ("zkelect_zero_rtt_takeovers_total", |m| m.zero_rtt_takeovers),
    ("zkelect_recovered_creates_total", |m| m.recovered_creates),
    ("zkelect_second_relists_total", |m| m.second_relists),
    ("zkelect_persistent_skipped_total", |m| m.persistent_skipped),
    ("zkelect_tokens_regressed_total", |m| m.tokens_regressed),
    ("zkelect_revocations_requested_total", |m| {
        m.revocations_requested
    }),
];

impl Facade {
    /// The timings of a machine that is not metered: nothing registered.
    pub(crate) fn unmetered() -> Self {
        Self {
            joined_at: None,
            demoted_at: None,
            leader_lost_at: None,
            last_leader: None,
        }
    }

    /// Registers the machine's series (labelled with `path`), so that a
    /// recorder shows them at zero from the start.
    pub(crate) fn new(path: &str) -> Self {
        use metrics::{counter, describe_histogram, gauge, histogram, Unit};
        describe_histogram!(
            "zkelect_time_to_elect_seconds",
            Unit::Seconds,
            "From joining the queue to being elected"
        );
        describe_histogram!(
            "zkelect_failover_seconds",
            Unit::Seconds,
            "From seeing the leader gone to seeing another one"
        );
        describe_histogram!(
            "zkelect_handoff_seconds",
            Unit::Seconds,
            "From this candidate's demotion to seeing its successor lead"
        );
        let label = shared(path);
        for (name, _) in COUNTERS {
            drop(counter!(name, "path" => label.clone()));
        }
        drop(gauge!("zkelect_leader", "path" => label.clone()));
        for name in [
            "zkelect_time_to_elect_seconds",
            "zkelect_failover_seconds",
            "zkelect_handoff_seconds",
        ] {
            drop(histogram!(name, "path" => label.clone()));
        }
        Self::unmetered()
    }

    /// Mirrors the counters that moved from `before` to `after` (absolute
    /// values: counted once, in the status); `path` is the machine's, the
    /// series' label.
    pub(crate) fn counters(path: &str, before: &Metrics, after: &Metrics) {
        let mut label = None;
        for (name, of) in COUNTERS {
            let n = of(after);
            if n != of(before) {
                let label = label.get_or_insert_with(|| shared(path)).clone();
                metrics::counter!(name, "path" => label).absolute(n);
            }
        }
    }

    /// Times what a notice ends; `own` is our node's name. What the gauge
    /// and the histograms are to be told goes to `mirror`. Returns whether
    /// it was a failover (a change from one leader to another).
    pub(crate) fn notice(
        &mut self,
        notice: &Notice,
        own: Option<&str>,
        now: Moment,
        mirror: &mut impl FnMut(Mirror),
    ) -> bool {
        let since = |t: Option<Moment>| now.since(t.unwrap_or(now));
        match notice {
            Notice::Joined { .. } => self.joined_at = Some(now),
            Notice::Elected { .. } => {
                mirror(Mirror::Leader(1.0));
                if let Some(joined) = self.joined_at.take() {
                    mirror(Mirror::Histogram(
                        "zkelect_time_to_elect_seconds",
                        since(Some(joined)),
                    ));
                }
            }
            Notice::Demoted { .. } => {
                mirror(Mirror::Leader(0.0));
                self.demoted_at = Some(now);
                self.leader_lost_at.get_or_insert(now);
            }
            Notice::Suspended => {
                self.leader_lost_at.get_or_insert(now);
            }
            Notice::LeaderChanged { leader } => {
                let Some(leader) = leader else {
                    self.leader_lost_at.get_or_insert(now);
                    return false;
                };
                let seen = LeaderSeen::of(leader);
                let failover = self.last_leader.is_some_and(|last| last != seen);
                if failover {
                    mirror(Mirror::Histogram(
                        "zkelect_failover_seconds",
                        since(self.leader_lost_at),
                    ));
                }
                if Some(leader.as_str()) != own {
                    if let Some(demoted) = self.demoted_at.take() {
                        mirror(Mirror::Histogram(
                            "zkelect_handoff_seconds",
                            since(Some(demoted)),
                        ));
                    }
                }
                self.leader_lost_at = None;
                self.last_leader = Some(seen);
                return failover;
            }
            Notice::Resumed
            | Notice::RevocationRequested
            | Notice::Downgraded
            | Notice::DowngradeRefused { .. }
            | Notice::RevocationDelivered { .. }
            | Notice::RevocationFailed(_)
            | Notice::PersistentSkipped { .. }
            | Notice::TokenRegressed { .. }
            | Notice::Participants(_)
            | Notice::Error(_) => {}
        }
        false
    }
}

/// `path` as a label value that the keys of several series share: each key
/// takes its own copy of its labels, and a clone of this is a reference
/// count where a clone of the path's text is an allocation. Even without
/// a recorder installed, each key is built (the facade cannot tell a no-op
/// recorder from another): registering a machine's 18 series cost a quarter
/// less for it (callgrind, `many` at 2,000 elections).
fn shared(path: &str) -> SharedString {
    SharedString::from(Arc::<str>::from(path))
}

/// A leader's node name, kept as a 64-bit digest: it is only ever compared
/// with the next leader's, and a copy of every machine's leader's name
/// would cost each idle machine some 60 bytes. Two names digest alike by
/// chance about once in 2^64 comparisons (a failover left uncounted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LeaderSeen(NonZeroU64);

impl LeaderSeen {
    fn of(name: &str) -> Self {
        use std::hash::{Hash, Hasher};
        // Fixed keys: the same name digests alike in every process.
        let mut hasher = std::hash::DefaultHasher::new();
        name.hash(&mut hasher);
        // Non-zero, so that an `Option` of it takes 8 bytes, not 16.
        Self(NonZeroU64::new(hasher.finish()).unwrap_or(NonZeroU64::MIN))
    }
}

/// A moment the facade times from: nanoseconds since the driver's epoch,
/// plus one. Non-zero, so that an `Option` of it takes 8 bytes where an
/// `Option<Instant>` takes 16 (three per machine); good for five centuries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Moment(NonZeroU64);

impl Moment {
    pub(crate) fn now(clock: &Clock) -> Self {
        let nanos = Instant::now()
            .saturating_duration_since(clock.epoch())
            .as_nanos();
        let nanos = u64::try_from(nanos).unwrap_or(u64::MAX).saturating_add(1);
        Self(NonZeroU64::new(nanos).unwrap_or(NonZeroU64::MIN))
    }

    /// The time from `earlier` to this moment (zero if it was later).
    fn since(self, earlier: Self) -> Duration {
        Duration::from_nanos(self.0.get().saturating_sub(earlier.0.get()))
    }
}
