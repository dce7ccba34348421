//! The clients' start-up, as the transports run it: the core's start-up
//! machine ([`zkelect_core::startup`]) driven against the world's servers,
//! each member answering as the swarm drew it (serving, stopped, frozen,
//! unresolvable, out of the quorum). Nothing here decides anything: the
//! machine does, and [`check`] holds it to its contract.
//!
//! Time: before the plan, a member that answers does so at the instant it
//! is asked (the world's replies take no time either); a silent one never
//! does, so the machine's own deadlines and its grace decide how long a
//! start takes. After the plan the machine lives on with its process
//! (`world::startup`): it asks again the listed members that have not
//! answered, in the background and at every (re)connection of the client,
//! and those asks take time ([`ask`]), so an ask's outcome can be older
//! than a connection the client made meanwhile.

use std::time::Duration;

use zkelect_core::startup::{
    AskFailure, Learn, Phase, Plan, Startup, StartupCommand, StartupConfig, StartupError,
};
use zkelect_core::Timestamp;

use crate::server::{MemberState, Server};

/// The connect timeout the simulated processes start with (the CLI's default).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// An answer on its way: when, which member and ask, what.
type Pending = (Timestamp, usize, u32, Result<Option<Duration>, AskFailure>);

/// A start-up's outcome: the plan, when it was made, what each member
/// was when asked, and the machine, which lives on with the process.
#[derive(Debug, Clone)]
pub struct Started {
    /// The machine's plan.
    pub plan: Plan,
    /// When the plan was made (the client connects then).
    pub at: Timestamp,
    /// Each member's state when the start-up began.
    pub members: Vec<MemberState>,
    /// The machine, in [`Phase::Connecting`](zkelect_core::startup::Phase):
    /// its `Connect` command taken, the client about to connect.
    pub machine: Startup,
}

/// Runs a start-up at `now` for a client asking for `requested`: the
/// machine's plan, or its refusal and when it came (the connect timeout,
/// when no member answered). With [`Learn::SessionTimeout`] every
/// serving member answers what it negotiates (by its own limits), and one
/// handshake is made on the server (a session opened and closed) for the
/// first answer. `config` adjusts the machine's settings (a canary's).
pub fn start_up(
    server: &mut Server,
    now: Timestamp,
    requested: Duration,
    learn: Learn,
    config: impl FnOnce(StartupConfig) -> StartupConfig,
) -> Result<Started, (Timestamp, StartupError)> {
    let n = server.servers();
    let members: Vec<MemberState> = (0..n).map(|i| server.member_state(i, now)).collect();
    let mut machine = Startup::new(now, config(StartupConfig::new(n, learn, CONNECT_TIMEOUT)));
    let mut handshaken = false;
    let mut pending: Vec<Pending> = Vec::new();
    let mut t = now;
    loop {
        let mut acted = false;
        while let Some(command) = machine.poll_command() {
            acted = true;
            match command {
                StartupCommand::Resolve { server: i, .. } => {
                    let found = if members[i] == MemberState::Unresolvable {
                        Err("no such host".to_owned())
                    } else {
                        Ok(())
                    };
                    machine.resolved(t, i, found);
                }
                StartupCommand::Ask {
                    server: i, attempt, ..
                } => {
                    let outcome = match members[i] {
                        MemberState::Serving => Some(Ok(match learn {
                            Learn::SessionTimeout => {
                                if !std::mem::replace(&mut handshaken, true) {
                                    server.handshake(now, requested, None);
                                }
                                Some(server.negotiate_at(i, requested))
                            }
                            Learn::Liveness => None,
                        })),
                        MemberState::Refusing => {
                            Some(Err(AskFailure::Refused("connection refused".into())))
                        }
                        MemberState::Closing => {
                            Some(Err(AskFailure::Broken("the connection was closed".into())))
                        }
                        MemberState::Silent | MemberState::Unresolvable => None,
                    };
                    if let Some(outcome) = outcome {
                        pending.push((t, i, attempt, outcome));
                    }
                }
                StartupCommand::Connect { plan, .. } => {
                    // Answers already in reach the machine that lives on.
                    for (_, server, attempt, outcome) in pending.drain(..) {
                        machine.answered(t, server, attempt, outcome);
                    }
                    return Ok(Started {
                        plan,
                        at: t,
                        members,
                        machine,
                    });
                }
            }
        }
        if let Phase::Refused(e) = machine.phase() {
            return Err((t, e.clone()));
        }
        if let Some(i) = pending.iter().position(|p| p.0 <= t) {
            let (_, server, attempt, outcome) = pending.remove(i);
            machine.answered(t, server, attempt, outcome);
            continue;
        }
        if acted {
            continue;
        }
        match machine.poll_timeout() {
            Some(next) => {
                t = t.max(next);
                machine.handle_timeout(t);
            }
            None => {
                return Err((
                    t,
                    StartupError::ClientFailed(
                        "the start-up machine stopped without a plan".into(),
                    ),
                ))
            }
        }
    }
}

/// The round trip of one ask after the plan, from a draw `d` in `[0, 99]`
/// and a fine draw `f` in `[0, 999]`: 1–20 ms in 4 asks of 5, and 100–900
/// ms in 1 of 5 (a far or loaded member, a JVM still warming up).
pub fn ask_trip(d: u64, f: u64) -> Duration {
    if d < 80 {
        Duration::from_millis(1 + f % 20)
    } else {
        Duration::from_millis(100 + f * 800 / 999)
    }
}

/// What member `member` does with an ask sent at `now` whose round trip is
/// `trip`: the outcome, decided by the member's state when the ask reaches
/// it (half the trip later) and heard at `now + trip`, or `None` for a
/// member that never answers (the machine's deadline decides). A serving
/// member answers what it negotiates for `requested` by its own limits.
pub fn ask(
    server: &Server,
    member: usize,
    now: Timestamp,
    trip: Duration,
    requested: Duration,
) -> Option<Result<Option<Duration>, AskFailure>> {
    match server.member_state(member, now + trip / 2) {
        MemberState::Serving => Some(Ok(Some(server.negotiate_at(member, requested)))),
        MemberState::Refusing => Some(Err(AskFailure::Refused("connection refused".into()))),
        MemberState::Closing => Some(Err(AskFailure::Broken("the connection was closed".into()))),
        MemberState::Silent | MemberState::Unresolvable => None,
    }
}

/// The start-up's contract, judged against the members as they were:
/// with any member serving it starts within the grace (250 ms); it lists
/// only members that served or refused the connection (never a silent or
/// unresolvable one); its bound is no greater than what each listed member
/// that served negotiates for `requested` (`negotiated`: by its own
/// limits). A listed member that refused may negotiate less once it is
/// back: the bound is confirmed again at every connection for that
/// (`world::startup`).
pub fn check(
    started: &Started,
    began: Timestamp,
    negotiated: impl Fn(usize) -> Duration,
) -> Result<(), String> {
    let grace = StartupConfig::new(1, Learn::Liveness, Duration::from_secs(1)).grace;
    let took = started.at.saturating_since(began);
    if started.members.contains(&MemberState::Serving) && took > grace {
        return Err(format!(
            "the start-up took {took:?} with a member serving (members {:?}): more than the grace of {grace:?}",
            started.members
        ));
    }
    for &i in &started.plan.servers {
        if !matches!(
            started.members[i],
            MemberState::Serving | MemberState::Refusing
        ) {
            return Err(format!(
                "the client was given zk{i}, which was {:?} at start",
                started.members[i]
            ));
        }
        if let (Some(bound), MemberState::Serving) = (started.plan.bound, started.members[i]) {
            let theirs = negotiated(i);
            if bound > theirs {
                return Err(format!(
                    "the start-up's bound {bound:?} is above the {theirs:?} zk{i} negotiates"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::server::{DownHow, EnsembleSpec, MemberDown};
    use crate::zk::ZkSettings;

    fn world(how: DownHow) -> Server {
        let spec = EnsembleSpec {
            servers: 3,
            faults: Vec::new(),
            down_at_start: Some(MemberDown {
                server: 1,
                how,
                until: None,
            }),
            lowered: None,
        };
        Server::new(ZkSettings::default(), Some(&spec))
    }

    #[test]
    fn a_member_down_is_started_around_by_the_plan_it_was_drawn_for() {
        let now = Timestamp::from_millis(1_000);
        let requested = Duration::from_secs(4);
        for (how, wait, listed) in [
            (DownHow::Stopped, 0, vec![0, 2, 1]),
            (DownHow::Frozen, 250, vec![0, 2]),
            (DownHow::Unresolvable, 0, vec![0, 2]),
        ] {
            let mut server = world(how);
            let started =
                start_up(&mut server, now, requested, Learn::SessionTimeout, |c| c).unwrap();
            assert_eq!(started.plan.servers, listed, "{how:?}");
            assert_eq!(started.at, now + Duration::from_millis(wait), "{how:?}");
            let negotiated = server.negotiate(requested);
            assert_eq!(started.plan.bound, Some(negotiated));
            assert_eq!(
                check(&started, now, |i| server.negotiate_at(i, requested)),
                Ok(())
            );
        }
    }

    /// Ordinary seeds draw every kind of member down at start, and their
    /// runs pass every checker (the start-up's among them).
    #[test]
    fn ordinary_seeds_draw_members_down_at_start_and_pass() {
        use crate::swarm::{Overrides, Swarm};
        let mut seen = std::collections::BTreeMap::new();
        let mut run = Vec::new();
        for seed in 0..3_000 {
            let swarm = Swarm::from_seed(seed, Overrides::default());
            let down = swarm.env.ensemble.as_ref().and_then(|e| e.down_at_start);
            if let Some(down) = down {
                *seen.entry(format!("{:?}", down.how)).or_insert(0) += 1;
                if run.len() < 30 {
                    run.push(seed);
                }
            }
        }
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert!(seen.values().all(|&n| n > 30), "{seen:?}");
        for seed in run {
            let report = crate::run::run_seed(seed, crate::run::RunOptions::default());
            assert!(
                report.violation.is_none(),
                "seed {seed}: {:?}",
                report.violation
            );
        }
    }

    /// Ordinary seeds draw members with a lower `maxSessionTimeout`, most
    /// often the member stopped at start, in worlds that run
    /// zookeeper-async; the running start-up machine lowers the bound when
    /// that member is back (with asks still on their way at a connection
    /// among the cases), and every run passes.
    #[test]
    fn ordinary_seeds_lower_the_bound_after_the_start_and_pass() {
        use crate::server::Lowered;
        let mut total = crate::world::RunStats::default();
        let (mut drawn, mut runs) = (0, 0);
        for seed in 0..20_000 {
            let swarm = crate::swarm::Swarm::from_seed(seed, Default::default());
            let Some(spec) = swarm.env.ensemble.as_ref() else {
                continue;
            };
            let Some(Lowered { server, .. }) = spec.lowered else {
                continue;
            };
            drawn += 1;
            let back = spec.down_at_start.is_some_and(|d| {
                d.server == server && d.how == DownHow::Stopped && d.until.is_some()
            });
            if !back || runs == 40 {
                continue;
            }
            runs += 1;
            let report = crate::run::run_seed(seed, crate::run::RunOptions::default());
            assert!(
                report.violation.is_none(),
                "seed {seed}: {:?}",
                report.violation
            );
            assert!(!report.knobs.session_ids, "seed {seed}: zookeeper-client");
            total.add(&report.stats);
        }
        assert!(drawn > 1_000 && runs == 40, "{drawn} drawn, {runs} run");
        assert!(total.bounds_lowered >= 20, "{total}");
        assert!(total.asks_in_flight_at_connection > 0, "{total}");
    }

    /// The canary of [`check`]: a start-up that waits for every server (the
    /// transports' old handshake) is caught with a frozen member.
    #[test]
    fn a_start_up_that_waits_for_every_server_is_caught() {
        let now = Timestamp::ZERO;
        let requested = Duration::from_secs(4);
        let mut server = world(DownHow::Frozen);
        let waits_for_all = |c: StartupConfig| StartupConfig {
            grace: c.connect_timeout,
            ..c
        };
        let started = start_up(
            &mut server,
            now,
            requested,
            Learn::SessionTimeout,
            waits_for_all,
        )
        .expect("it starts, late");
        let e = check(&started, now, |i| server.negotiate_at(i, requested)).unwrap_err();
        assert!(e.contains("more than the grace"), "{e}");
    }
}
