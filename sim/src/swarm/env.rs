//! The world a seed puts around the zkelect candidates: the queue's
//! recipe, the server, the connect strings, foreign models and look-alikes.

use std::fmt;
use std::time::Duration;

use super::hosting::{Hosting, SideQueue};
use super::recipe::Queue;
use crate::foreign::Scheme;
use crate::rng::SimRng;

/// The world a seed puts around the zkelect candidates (the environment users give it): how the
/// server clamps session timeouts, which naming scheme the candidates use,
/// which other library's contenders share their queue, and which PERSISTENT
/// children named like contenders sit in it.
///
/// `Env::default()` is the plain world: default server limits, interop off, no
/// foreign contenders, no look-alikes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Env {
    /// The scheme zkelect candidates name their nodes in (their interop setting).
    pub interop: Scheme,
    /// Models of the interop scheme's library that start with the candidates
    /// (pids right after the zkelect candidates). Zero with `Scheme::Ours`.
    pub foreign: usize,
    /// PERSISTENT look-alikes an operator creates before anyone joins (with
    /// sequential creates, so they sort below every contender).
    pub lookalikes: Vec<Scheme>,
    /// The server's `minSessionTimeout` (`None`: its default, 2 ticks).
    pub min_session_timeout: Option<Duration>,
    /// The server's `maxSessionTimeout` (`None`: its default, 20 ticks).
    pub max_session_timeout: Option<Duration>,
    /// The queue's recipe (its k is [`Swarm::leaders`](super::Swarm::leaders)).
    pub queue: Queue,
    /// Which candidates share a session, and the observers.
    pub hosting: Hosting,
    /// An ensemble of 3 or 5 and its member faults (`None`: one server).
    pub ensemble: Option<crate::server::EnsembleSpec>,
    /// Sessions whose connect string has a chroot that cannot hold the
    /// queue ([`BadChroot`]; `None`: every connect string is plain).
    pub chroot: Option<BadChroot>,
    /// Every session that carries more than observers connects this late,
    /// so that the observers list the queue before its path exists
    /// (`None`: all connect within 50 ms of the start).
    pub late_start: Option<Duration>,
    /// A session whose credentials the server refuses at one of its
    /// reconnects ([`Refusal`]; `None`: every session's are accepted).
    pub refusal: Option<Refusal>,
    /// An operator who takes write permission on a downgraded writer's node
    /// away and writes over its read mark ([`AclChange`]; `None`: no node's
    /// ACL changes after its create).
    pub acl_change: Option<AclChange>,
}

/// What a bad chroot names ([`BadChroot`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChrootRoot {
    /// A node that does not exist (`/apps/x`).
    Missing,
    /// An ephemeral node (`/eph`, which a session of the operator's holds
    /// for the whole run): it cannot have children.
    Ephemeral,
}

impl ChrootRoot {
    /// The chroot, as the connect string gives it.
    pub fn path(self) -> &'static str {
        match self {
            ChrootRoot::Missing => "/apps/x",
            ChrootRoot::Ephemeral => "/eph",
        }
    }
}

/// Connect strings whose chroot cannot hold the queue: the misconfigured
/// part of a fleet (or all of it), drawn in ordinary seeds
/// ([`BadChroot::draw`]). Every machine on such a session must stop with
/// the core's typed `CandidateError::Namespace` after a bounded number of
/// requests (an observer reports an empty queue and waits), and no other
/// machine may report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadChroot {
    /// What the chroot names.
    pub root: ChrootRoot,
    /// The sessions (by their host, a candidate of the first queue at the
    /// start) whose connect string has it, ascending.
    pub hosts: Vec<usize>,
}

impl BadChroot {
    /// Draws it for `seed` from a stream of its own (label 21, so every
    /// other draw stays put): 1 in 8 seeds, missing or ephemeral evenly,
    /// on every session of the first queue's candidates 1 in 4 of those
    /// (the whole fleet misconfigured), else on each such session 1 in 3
    /// (at least one).
    pub fn draw(seed: u64, hosting: &Hosting, candidates: usize) -> Option<Self> {
        let mut rng = SimRng::new(seed, 21);
        if !rng.chance(0.125) {
            return None;
        }
        let root = if rng.chance(0.5) {
            ChrootRoot::Missing
        } else {
            ChrootRoot::Ephemeral
        };
        let sessions: Vec<usize> = (0..candidates).filter(|&p| hosting.host(p) == p).collect();
        let all = rng.chance(0.25);
        let mut hosts: Vec<usize> = sessions
            .iter()
            .copied()
            .filter(|_| all || rng.chance(1.0 / 3.0))
            .collect();
        if hosts.is_empty() {
            let i = rng.range(0, sessions.len() as u64 - 1) as usize;
            hosts.push(sessions[i]);
        }
        Some(Self { root, hosts })
    }
}

/// A session whose credentials the server refuses when its client
/// reconnects to it (`SessionEvent::AuthFailed`: a provider gone from the
/// server, a password changed): drawn in ordinary seeds whose sessions
/// authenticate ([`Refusal::draw`]). Its client reports `AuthFailed` and
/// stops there, as both real clients do; the server keeps the session. The
/// core's session must end on it, and its host close the client, so that
/// the session's nodes go at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// The session's host: a zkelect candidate of the first queue at the
    /// start, on a session of its own.
    pub host: usize,
    /// Which of its client's reconnects to the same (live) session is
    /// refused: 1 is the first.
    pub nth: u32,
}

impl Refusal {
    /// Draws it for `seed` from a stream of its own (label 26, so every
    /// other draw stays put), in seeds whose sessions authenticate
    /// (`authenticated`: the `acl` knob is `CreatorAllWorldRead` or
    /// `Digests`): 1 in 8 of them, one host among the first queue's
    /// candidates that have a session of their own, at its first or second
    /// reconnect to the same session (evenly).
    pub fn draw(
        seed: u64,
        authenticated: bool,
        hosting: &Hosting,
        candidates: usize,
    ) -> Option<Self> {
        if !authenticated {
            return None;
        }
        let mut rng = SimRng::new(seed, 26);
        if !rng.chance(0.125) {
            return None;
        }
        let sessions: Vec<usize> = (0..candidates).filter(|&p| hosting.host(p) == p).collect();
        let i = rng.range(0, (sessions.len() as u64).checked_sub(1)?) as usize;
        let nth = rng.range(1, 2) as u32;
        Some(Self {
            host: sessions[i],
            nth,
        })
    }
}

/// An operator who, some time after the run's first writer told its
/// application it downgraded to a reader (`Notice::Downgraded`), sets that
/// writer's node's ACL to `world:anyone` READ only (`setACL`, as the super
/// user, who may change any node's ACL) and writes over its read mark:
/// the writer hears the write, and its write of the mark back is refused
/// (`NoAuth`). The core's documented end (`Unkept`): it reads only, tells
/// nothing new, and the queue sees a writer again, so readers behind it
/// wait, which is safe. Drawn in ordinary seeds ([`AclChange::draw`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AclChange {
    /// How long after the first `Downgraded` notice the operator acts.
    pub after: Duration,
}

impl AclChange {
    /// Draws it for `seed` from a stream of its own (label 27, so every
    /// other draw stays put), in seeds where it can happen: sessions
    /// authenticate (`authenticated`: the `acl` knob is
    /// `CreatorAllWorldRead` or `Digests`, the only ACLs that can refuse a
    /// node's owner while granting it the create), some process downgrades
    /// (`downgrades`), some queue is a read-write lock (`read_write`), and
    /// one server (`single`: an ensemble's log has no `setACL`). Half of
    /// those, 0 to 3 s after the first downgrade (evenly, in ms).
    pub fn draw(
        seed: u64,
        authenticated: bool,
        downgrades: bool,
        read_write: bool,
        single: bool,
    ) -> Option<Self> {
        if !(authenticated && downgrades && read_write && single) {
            return None;
        }
        let mut rng = SimRng::new(seed, 27);
        if !rng.chance(0.5) {
            return None;
        }
        Some(Self {
            after: Duration::from_millis(rng.range(0, 3_000)),
        })
    }
}

/// The simulated server's tick (`tickTime`).
pub const TICK: Duration = Duration::from_millis(200);

impl Env {
    /// The server settings for this world.
    pub fn server(&self, cversion_start: i32) -> crate::zk::ZkSettings {
        crate::zk::ZkSettings {
            tick: TICK,
            cversion_start,
            min_session_timeout: self.min_session_timeout,
            max_session_timeout: self.max_session_timeout,
        }
    }

    /// The library whose models share the queue, if any.
    pub fn library(&self) -> Option<Scheme> {
        (self.foreign > 0 && self.interop != Scheme::Ours).then_some(self.interop)
    }

    /// The look-alike schemes this world may hold. Every scheme, except next
    /// to foreign models their own: Curator and kazoo wait forever behind a
    /// persistent node they count as a contender, and zkelect cannot lead past
    /// a live foreign node that waits, so nothing could lead there.
    pub fn lookalike_schemes(&self) -> Vec<Scheme> {
        Scheme::ALL
            .into_iter()
            .filter(|s| self.library() != Some(*s))
            .collect()
    }

    /// Draws the world for a seed with `leaders` leaders and this requested
    /// timeout (from its own stream, so the rest of the scenario stays put).
    pub(super) fn draw(seed: u64, leaders: u32, requested: Duration) -> Self {
        let mut rng = SimRng::new(seed, 4);
        let mut env = Env::default();
        let ms = requested.as_millis() as u64;
        let default_max = (TICK * 20).as_millis() as u64;
        match rng.range(0, 9) {
            // The server's maximum below the request: clamped down.
            0..=2 => {
                let max = (ms * rng.range(40, 90) / 100 / 100 * 100).max(1_000);
                env.max_session_timeout = Some(Duration::from_millis(max));
            }
            // Its minimum above the request: clamped up.
            3..=4 => {
                let min = (ms * rng.range(120, 200) / 100 / 100 * 100).min(8_000);
                env.min_session_timeout = Some(Duration::from_millis(min));
                env.max_session_timeout = Some(Duration::from_millis(min.max(default_max)));
            }
            // The defaults (which clamp requests above 20 ticks down).
            _ => {}
        }
        env.interop = match rng.range(0, 9) {
            // Interop elects one leader, as Curator and kazoo do; more is refused.
            _ if leaders > 1 => Scheme::Ours,
            0..=3 => Scheme::Ours,
            4..=6 => Scheme::Curator,
            _ => Scheme::Kazoo,
        };
        // Curator's and kazoo's recipes elect one leader.
        if env.interop != Scheme::Ours && leaders == 1 && rng.chance(0.8) {
            env.foreign = rng.range(1, 4) as usize;
        }
        if rng.chance(0.3) {
            let schemes = env.lookalike_schemes();
            for _ in 0..rng.range(1, 3) {
                let i = rng.range(0, schemes.len() as u64 - 1) as usize;
                env.lookalikes.push(schemes[i]);
            }
        }
        env
    }
}

impl fmt::Display for Env {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms =
            |d: Option<Duration>| d.map_or("default".to_owned(), |d| d.as_millis().to_string());
        let lookalikes: Vec<&str> = self.lookalikes.iter().map(|s| s.label()).collect();
        write!(
            f,
            "queue={} interop={} foreign={} lookalikes=[{}] min_session={} max_session={}",
            self.queue.label(),
            self.interop,
            self.foreign,
            lookalikes.join(","),
            ms(self.min_session_timeout),
            ms(self.max_session_timeout)
        )?;
        if self.hosting != Hosting::default() {
            write!(
                f,
                " riders={:?} observers={:?}",
                self.hosting.riders, self.hosting.observers
            )?;
            for (i, q) in self.hosting.queues.iter().enumerate() {
                let machines: Vec<String> = q
                    .machines
                    .iter()
                    .map(|m| {
                        let kind = if m.observer { "o" } else { "c" };
                        m.on.map_or(kind.to_owned(), |h| format!("{kind}@p{h}"))
                    })
                    .collect();
                write!(
                    f,
                    " {}={}(k={})[{}]",
                    SideQueue::path(i + 1),
                    q.queue.label(),
                    q.leaders,
                    machines.join(",")
                )?;
            }
        }
        if let Some(bad) = &self.chroot {
            write!(f, " chroot={}@{:?}", bad.root.path(), bad.hosts)?;
        }
        if let Some(late) = self.late_start {
            write!(f, " late_start={}ms", late.as_millis())?;
        }
        if let Some(r) = &self.refusal {
            write!(f, " refused=p{}@reconnect{}", r.host, r.nth)?;
        }
        if let Some(c) = &self.acl_change {
            write!(f, " acl_change=downgraded+{}ms", c.after.as_millis())?;
        }
        match &self.ensemble {
            Some(spec) => write!(f, " {spec}"),
            None => Ok(()),
        }
    }
}
