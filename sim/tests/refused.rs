//! Credentials refused at a reconnect: ordinary seeds whose sessions
//! authenticate draw, now and then, one host whose client the server
//! refuses on reconnecting to its live session (`Refusal`). Its client
//! reports `AuthFailed` and stops there; the core's session must end on it
//! and its host close the client, so that the session's nodes go at once
//! (`refused-leaves-nothing`), while every other checker holds. A host that
//! keeps its client open on such a session (the canary) is caught.

mod support;

use zkelect_core::CandidateError;
use zkelect_sim::check::Checker;
use zkelect_sim::swarm::{FaultMix, Overrides, Refusal, Swarm};
use zkelect_sim::world::{Refused, Violation};

use support::{checked_world, ErrorLog, Reported};

/// What a run of a drawing seed did.
struct Outcome {
    violation: Option<Violation>,
    refused: Option<Refused>,
    /// Hosts whose replay of the credentials ran out of time (their
    /// `AuthFailed` is the replay's, `tests/replay.rs`).
    lapsed: Vec<usize>,
    errors: Vec<Reported>,
    /// The refused host's client was closed, and the server's session gone.
    closed: bool,
}

fn run(seed: u64, swarm: Swarm, planted: bool) -> Outcome {
    let (log, errors) = ErrorLog::new();
    let mut world = checked_world(seed, swarm, [Box::new(log) as Checker]);
    if planted {
        world.plant_keeps_refused_client();
    }
    let violation = world.run();
    let refused = world.refused();
    let lapsed = world.lapsed().iter().map(|r| r.host).collect();
    let closed = refused.is_some_and(|r| {
        world.process(r.host).session_closed && !world.zk().session_alive(r.session)
    });
    let errors = errors.borrow().clone();
    Outcome {
        violation,
        refused,
        lapsed,
        errors,
        closed,
    }
}

/// Seeds of `mix` in `range` whose swarm draws a refusal.
fn drawing(mix: FaultMix, range: std::ops::Range<u64>) -> Vec<(u64, Swarm)> {
    let overrides = Overrides {
        faults: mix,
        ..Overrides::default()
    };
    range
        .map(|seed| (seed, Swarm::from_seed(seed, overrides)))
        .filter(|(_, s)| s.env.refusal.is_some())
        .collect()
}

/// The draw: only where sessions authenticate, about 1 in 8 of those, a
/// host of the first queue with a session of its own; never in a canary's
/// seeds.
#[test]
fn refusals_are_drawn_only_where_sessions_authenticate() {
    let mut authenticated = 0;
    let mut drawn = 0;
    for seed in 0..4_000 {
        let swarm = Swarm::from_seed(seed, Overrides::default());
        let knobs = zkelect_sim::swarm::Knobs::from_seed(seed, false);
        if knobs.acl.authenticates() {
            authenticated += 1;
        }
        let Some(Refusal { host, nth }) = swarm.env.refusal else {
            continue;
        };
        drawn += 1;
        assert!(knobs.acl.authenticates(), "seed {seed}: {:?}", knobs.acl);
        assert!(host < swarm.candidates, "seed {seed}: p{host}");
        assert_eq!(swarm.env.hosting.host(host), host, "seed {seed}");
        assert!((1..=2).contains(&nth), "seed {seed}: {nth}");
        let canary = zkelect_sim::canary::Canary::ALL[0];
        let documented = Swarm::for_seed(seed, Overrides::default(), Some(canary));
        assert_eq!(documented.env.refusal, None, "seed {seed}");
    }
    // 1 in 8 of the authenticated seeds, give or take.
    assert!(
        drawn * 8 > authenticated * 2 / 3 && drawn * 8 < authenticated * 3 / 2,
        "{drawn} of {authenticated}"
    );
}

/// Every drawing seed among the first of each fault mix passes every
/// checker; where the refused reconnect came, the refused host's machines
/// (and no other) stopped with `AuthFailed`, its client was closed and the
/// server's session went with it.
#[test]
fn drawing_seeds_pass_every_checker_and_the_refused_session_ends() {
    let mut refused = 0;
    let mut seeds = 0;
    for mix in FaultMix::ALL {
        for (seed, swarm) in drawing(mix, 0..600) {
            seeds += 1;
            let host = swarm.env.refusal.map(|r| r.host);
            let out = run(seed, swarm, false);
            assert!(
                out.violation.is_none(),
                "{} seed {seed}: {:?}",
                mix.flag(),
                out.violation
            );
            // Other errors (a bad chroot's) are `no-error`'s to judge.
            let auth: Vec<(usize, usize)> = out
                .errors
                .iter()
                .filter(|r| matches!(r.error, CandidateError::AuthFailed))
                .filter(|r| !out.lapsed.contains(&r.host))
                .map(|r| (r.pid, r.host))
                .collect();
            let Some(r) = out.refused else {
                // Its host never came back to the same session that often.
                assert!(auth.is_empty(), "{} seed {seed}: {auth:?}", mix.flag());
                continue;
            };
            refused += 1;
            assert!(
                !auth.is_empty(),
                "{} seed {seed}: no AuthFailed",
                mix.flag()
            );
            assert_eq!(Some(r.host), host);
            assert!(
                auth.iter().all(|&(_, h)| h == r.host),
                "{} seed {seed}: {auth:?}",
                mix.flag()
            );
            assert!(
                out.closed,
                "{} seed {seed}: p{} not closed",
                mix.flag(),
                r.host
            );
        }
    }
    eprintln!(
        "{refused} of {seeds} drawing seeds (0..600 of each mix) reached the refused reconnect"
    );
    assert!(seeds >= 40, "{seeds} drawing seeds");
    assert!(refused >= 10, "{refused} refused of {seeds}");
}

/// The canary: a host that keeps its client open on a session finished by
/// refused credentials (the session lives on, with its nodes, until it
/// expires). `refused-leaves-nothing` catches it in ordinary drawing seeds
/// of the standard mix, wherever the refused session held a node, and the
/// same seeds pass without it.
#[test]
fn a_host_keeping_its_refused_client_open_is_caught() {
    let mut caught = 0;
    let mut reached = 0;
    for (seed, swarm) in drawing(FaultMix::Standard, 0..1_500).into_iter().take(40) {
        let clean = run(seed, swarm.clone(), false);
        assert!(
            clean.violation.is_none(),
            "seed {seed}: {:?}",
            clean.violation
        );
        if clean.refused.is_none() {
            continue;
        }
        reached += 1;
        let planted = run(seed, swarm, true);
        if let Some(v) = planted.violation {
            assert_eq!(v.invariant, "refused-leaves-nothing", "seed {seed}: {v:?}");
            assert!(v.detail.contains("still owns"), "{}", v.detail);
            // At the refusal's own instant, by the step pass (the end's
            // pass would see it too, but only when the run is over): the
            // world's shortcut over step checkers re-asks it after a
            // refusal.
            let at = planted.refused.map(|r| r.at);
            assert_eq!(Some(v.at), at, "seed {seed}: {v:?}");
            caught += 1;
        }
    }
    eprintln!(
        "caught in {caught} of {reached} seeds that reached the refusal (first 40 drawing seeds)"
    );
    assert!(caught >= 5, "caught in {caught} of {reached}");
}
