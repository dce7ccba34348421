//! Bugs a simulator plants in a session on purpose, to show its checkers
//! catch them: canaries of the session's own rules. Built only with the
//! `planted` feature (the simulator's); a session has none unless one is
//! planted with [`Session::plant`](super::Session::plant).

/// A bug planted in a session's routing, in how it runs an observer, or in
/// one of its candidates.
// rustdoc marks a gated item with its feature (`doc_cfg`) only in the crate
// it documents under `--cfg docsrs`; where this item is shown from another
// crate's docs (`zkelect::core`), the sentence says it instead.
#[cfg_attr(
    not(docsrs),
    doc = "\n\n*Available on crate feature `planted` of `zkelect-core` only.*"
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Planted {
    /// A shared watch's event goes to the first machine armed on it only
    /// (the one-watch-per-session rule forgotten): the others never wake.
    /// A simulator's `liveness` catches it.
    SharedWatchToOne,
    /// The watch table files its watches per table, forgetting the path
    /// across queues: a watch event of one queue's path also goes to the
    /// machines armed in that table on another queue's paths, and disarms
    /// them, so they get an event that is not theirs and miss their own.
    /// Within one queue the routing stays right, so sessions of one queue
    /// never see it.
    WatchByTable,
    /// Observers never see their queue's child events, so they never list
    /// it again: their participant lists go stale.
    ObserverSkipsRelist,
    /// An observer whose path is missing sets no watch with its `exists`
    /// (the request goes out without one): it believes it waits for the
    /// path's creation, and never hears of it.
    ObserverSetsNoCreationWatch,
    /// A multi-lock takes its parts in the order it was given them, not
    /// sorted (Curator's way): two given the same paths in opposite orders
    /// deadlock. A simulator's `multi-lock` liveness check catches it.
    MultiLockInGivenOrder,
    /// A candidate holds on its nearest watched node's deletion notice
    /// whatever its books show below it: the two-watch takeover without its
    /// condition (the farther node gone, or the listing showing the nearest
    /// alone). A waiter between a holder and us that gives up hands us the
    /// lock beside the holder. A simulator's `safety` catches it.
    TakeoverBesideSecond,
    /// A closing candidate ends its close on the late answer to a listing
    /// it sent before its delete (superseded by the delete, so stale): the
    /// listing proves nothing about the node after the delete went out,
    /// yet the machine stops as if the delete had been answered. A
    /// simulator's `stale-reply` catches it.
    CloseOnStaleListing,
    /// A writer's downgrade reads its node and tells the application
    /// `Downgraded` without writing its mark: it reads and believes the
    /// queue knows, but readers behind still see a writer and wait for it
    /// (as do observers). A simulator's `read-mark` catches it.
    DowngradeWithoutMark,
    /// The session's `handle_timeout` does nothing: a deadline it named
    /// stays due, and a driver that wakes it then wakes it at once and
    /// again, at one instant, for ever (the hot loop of a machine that
    /// answers an input with an immediate retry). A simulator's
    /// `time-advances` catches it.
    TimerAnsweredByNothing,
}
