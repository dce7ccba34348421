//! A custom runtime embeds the whole session: no tokio, no async at all.
//!
//! ```text
//! cargo run -p zkelect-sim --example by_hand      # prints what happens
//! cargo test -p zkelect-sim --example by_hand     # and checks it
//! ```
//!
//! Two processes, each one `zkelect_core::Session` carrying an election
//! and a mutex, driven by one blocking loop on one std thread, over the
//! simulator's ZooKeeper model (`zkelect_sim::zk::ZkModel`). The loop is
//! the whole contract of a session, as any runtime would write it: wait
//! (here `recv_timeout` on a channel) for an input or the session's next
//! deadline, read the clock once, feed the input, then drain the events
//! (before the requests, so a demotion is heard first) and send the
//! requests. Every decision — the routing of replies and watch events, the
//! probe, the request window, the lock's release — is the core's.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use zkelect_core::{
    Candidate, Config, Event, Input, Machine, MachineId, Notice, Rule, Session, SessionConfig,
    SessionEvent, SessionId, Timestamp,
};
use zkelect_sim::zk::{ZkModel, ZkSettings};

/// The wall clock. The simulator's machines never read one (they are
/// given `now`); this example is the runtime, and a runtime owns the clock.
#[allow(clippy::disallowed_methods)]
fn wall() -> Instant {
    Instant::now()
}

/// One process: its session on the server and its machines.
struct Process {
    name: &'static str,
    session: Session,
    id: SessionId,
    election: MachineId,
    mutex: MachineId,
    /// Its session on the server was closed (the transport's close).
    closed: bool,
}

/// What the loop hears: an input for one process.
type Inbox = (usize, Input);

/// Something the application of a process did or saw, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Leads(&'static str),
    Holds(&'static str),
    Released(&'static str),
    Closed(&'static str),
}

/// The runtime: a clock, the server, and the processes' inbox.
struct Runtime {
    start: Instant,
    server: ZkModel,
    inbox: mpsc::Receiver<Inbox>,
    post: mpsc::Sender<Inbox>,
    processes: Vec<Process>,
    seen: Vec<Seen>,
}

impl Runtime {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX))
    }

    /// A process with a session on the server, an election and a mutex.
    fn spawn(
        &mut self,
        name: &'static str,
        seed: u64,
    ) -> Result<usize, Box<dyn std::error::Error>> {
        let now = self.now();
        let (id, timeout) = self.server.open_session(now, Duration::from_secs(4), None);
        let mut session = Session::new(SessionConfig::new(seed));
        let config = Config::builder("/svc/leader", name)
            .nonce_seed(seed)
            .build()?;
        let election = session.add(now, Machine::election(Candidate::new(config)));
        let config = Config::builder("/svc/lock", name)
            .rule(Rule::Mutex)
            .nonce_seed(seed + 1)
            .build()?;
        let mutex = session.add(now, Machine::lock(Candidate::new(config)));
        session.join(now, election)?;
        session.join(now, mutex)?;
        let index = self.processes.len();
        self.processes.push(Process {
            name,
            session,
            id,
            election,
            mutex,
            closed: false,
        });
        // The client connected: its first session event.
        let connected = SessionEvent::Connected {
            session_id: Some(id),
            timeout,
        };
        self.post.send((index, Input::Session(connected)))?;
        Ok(index)
    }

    /// Runs until `done` holds of what was seen, or `limit` passes.
    fn run_until(&mut self, limit: Duration, done: impl Fn(&[Seen]) -> bool) -> bool {
        let end = wall() + limit;
        while !done(&self.seen) {
            // Block until an input comes or the earliest deadline is due.
            let now = self.now();
            let due = self
                .processes
                .iter()
                .filter_map(|p| p.session.poll_timeout())
                .min()
                .map(|t| Duration::from_millis(t.as_millis().saturating_sub(now.as_millis())));
            let wait = due
                .unwrap_or(Duration::from_millis(50))
                .min(end.saturating_duration_since(wall()));
            let input = self.inbox.recv_timeout(wait).ok();
            if wall() >= end {
                return false;
            }
            // One clock reading per turn.
            let now = self.now();
            match input {
                Some((p, input)) => self.processes[p].session.handle(now, input),
                None => {
                    for p in &mut self.processes {
                        p.session.handle_timeout(now);
                    }
                }
            }
            self.drain(now);
        }
        true
    }

    /// Each process's events (the application hears them), then its
    /// requests (the server answers at once; what a request fires goes to
    /// the session whose watch it was).
    fn drain(&mut self, now: Timestamp) {
        for p in 0..self.processes.len() {
            while let Some(event) = self.processes[p].session.poll_event() {
                self.hear(p, event);
            }
            while let Some(command) = self.processes[p].session.poll_command() {
                let id = self.processes[p].id;
                let (result, fired) = self.server.apply(now, id, &command.request);
                let _ = self.post.send((
                    p,
                    Input::Reply {
                        op: command.op,
                        result,
                    },
                ));
                self.deliver(fired);
            }
            // Finished: its machines are done; the transport closes.
            if self.processes[p].session.is_finished() && !self.processes[p].closed {
                self.processes[p].closed = true;
                let fired = self.server.close_session(self.processes[p].id);
                self.deliver(fired);
            }
        }
    }

    /// Watch events go to the session whose watch fired.
    fn deliver(&self, fired: Vec<zkelect_sim::zk::Fired>) {
        for f in fired {
            if let Some(owner) = self.processes.iter().position(|q| q.id == f.session) {
                let _ = self.post.send((owner, Input::Watch(f.event)));
            }
        }
    }

    fn hear(&mut self, p: usize, event: Event) {
        let process = &self.processes[p];
        let (name, election, mutex) = (process.name, process.election, process.mutex);
        match event {
            Event::Notice {
                machine,
                notice: Notice::Elected { token },
            } => {
                println!(
                    "{name}: {} with fencing token {token}",
                    if machine == mutex {
                        "holds the mutex"
                    } else {
                        "leads"
                    }
                );
                self.seen.push(if machine == election {
                    Seen::Leads(name)
                } else {
                    Seen::Holds(name)
                });
            }
            Event::Notice {
                machine,
                notice: Notice::Demoted { reason },
            } if machine == mutex => {
                println!("{name}: let go of the mutex ({reason})");
                self.seen.push(Seen::Released(name));
            }
            Event::Stopped { machine, exit, .. } if machine == election => {
                println!("{name}: election left ({exit:?})");
                self.seen.push(Seen::Closed(name));
            }
            _ => {}
        }
    }

    /// The application of process `p` releases its mutex.
    fn release(&mut self, p: usize) {
        let now = self.now();
        let mutex = self.processes[p].mutex;
        // Its delete is the session's next request: in this same step.
        let _ = self.processes[p].session.close(now, mutex);
        self.drain(now);
    }

    /// Process `p` shuts down: every machine closes (deleting its node),
    /// then the session.
    fn shut_down(&mut self, p: usize) {
        let now = self.now();
        self.processes[p].session.close_session(now);
        self.drain(now);
    }
}

/// Runs the two processes through a mutex hand-off and a failover; returns
/// what their applications saw, in order.
fn run() -> Result<Vec<Seen>, Box<dyn std::error::Error>> {
    let (post, inbox) = mpsc::channel();
    let mut rt = Runtime {
        start: wall(),
        server: ZkModel::new(ZkSettings::default()),
        inbox,
        post,
        processes: Vec::new(),
        seen: Vec::new(),
    };
    let limit = Duration::from_secs(10);
    let a = rt.spawn("a", 1)?;
    // `a` leads and holds before `b` joins.
    let both = |s: &[Seen]| s.contains(&Seen::Leads("a")) && s.contains(&Seen::Holds("a"));
    if !rt.run_until(limit, both) {
        return Err("a never led and held".into());
    }
    let b = rt.spawn("b", 3)?;
    // `b` queues behind `a` on both; give it time to settle.
    rt.run_until(Duration::from_millis(100), |_| false);
    rt.release(a);
    if !rt.run_until(limit, |s| s.contains(&Seen::Holds("b"))) {
        return Err("b never held after a released".into());
    }
    rt.shut_down(a);
    if !rt.run_until(limit, |s| s.contains(&Seen::Leads("b"))) {
        return Err("b never led after a left".into());
    }
    rt.shut_down(b);
    if !rt.run_until(limit, |s| s.contains(&Seen::Closed("b"))) {
        return Err("b never closed".into());
    }
    let left: Vec<String> = ["/svc/leader", "/svc/lock"]
        .iter()
        .flat_map(|p| rt.server.children(p))
        .collect();
    if !left.is_empty() {
        return Err(format!("nodes left behind: {left:?}").into());
    }
    Ok(rt.seen)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seen = run()?;
    println!("{} things seen, no node left behind", seen.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_driven_by_hand_hands_a_mutex_over_and_fails_an_election_over() {
        let seen = run().expect("runs");
        let at = |s: &Seen| seen.iter().position(|x| x == s).expect("seen");
        // The mutex went from a to b only once a had let go.
        assert!(at(&Seen::Holds("a")) < at(&Seen::Released("a")));
        assert!(at(&Seen::Released("a")) < at(&Seen::Holds("b")));
        // b led only once a had left.
        assert!(at(&Seen::Leads("a")) < at(&Seen::Closed("a")));
        assert!(at(&Seen::Closed("a")) < at(&Seen::Leads("b")));
        assert_eq!(
            seen.iter().filter(|s| matches!(s, Seen::Leads(_))).count(),
            2
        );
    }
}
