//! The clients' start-up, as the transports run it: the core's start-up
//! machine ([`zkelect_core::startup`]) driven against the world's servers,
//! each member answering as the swarm drew it (serving, stopped, frozen,
//! unresolvable, out of the quorum). Nothing here decides anything: the
//! machine does, and [`check`] holds it to its contract.
//!
//! Time: a member that answers does so at the instant it is asked (the
//! world's replies take no time either); a silent one never does, so the
//! machine's own deadlines and its grace decide how long a start takes.

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

/// A start-up's outcome: the plan, when it was made, and what each member
/// was when asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// The machine's plan.
    pub plan: Plan,
    /// When the plan was made (the client connects then).
    pub at: Timestamp,
    /// Each member's state when the start-up began.
    pub members: Vec<MemberState>,
}

/// Runs a start-up at `now` for a client asking for `requested`: the
/// machine's plan, or its refusal. With [`Learn::SessionTimeout`] every
/// serving member answers what the server negotiates, and one handshake is
/// made on the server (a session opened and closed), as the transport asks
/// once per process. `config` adjusts the machine's settings (a canary's).
pub fn start_up(
    server: &mut Server,
    now: Timestamp,
    requested: Duration,
    learn: Learn,
    config: impl FnOnce(StartupConfig) -> StartupConfig,
) -> Result<Started, StartupError> {
    let n = server.servers();
    let members: Vec<MemberState> = (0..n).map(|i| server.member_state(i, now)).collect();
    let mut machine = Startup::new(now, config(StartupConfig::new(n, learn, CONNECT_TIMEOUT)));
    let mut negotiated = None;
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
                            Learn::SessionTimeout => Some(
                                *negotiated
                                    .get_or_insert_with(|| server.handshake(now, requested, None)),
                            ),
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
                    return Ok(Started {
                        plan,
                        at: t,
                        members,
                    })
                }
            }
        }
        if let Phase::Refused(e) = machine.phase() {
            return Err(e.clone());
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
                return Err(StartupError::ClientFailed(
                    "the start-up machine stopped without a plan".into(),
                ))
            }
        }
    }
}

/// The start-up's contract, judged against the members as they were:
/// with any member serving it starts within the grace (250 ms); it lists
/// only members that served or refused the connection (never a silent or
/// unresolvable one); its bound is no greater than the negotiated timeout.
pub fn check(started: &Started, began: Timestamp, negotiated: Duration) -> Result<(), String> {
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
    }
    if let Some(bound) = started.plan.bound {
        if bound > negotiated {
            return Err(format!(
                "the start-up's bound {bound:?} is above the negotiated {negotiated:?}"
            ));
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
            assert_eq!(check(&started, now, negotiated), Ok(()));
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
        let e = check(&started, now, server.negotiate(requested)).unwrap_err();
        assert!(e.contains("more than the grace"), "{e}");
    }
}
