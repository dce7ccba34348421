//! The `observer` target: an [`Observer`] of any queue fed arbitrary inputs.
//!
//! The bytes become an observer configuration (every recipe, k, interop
//! scheme, and a prefix) and a schedule: answers to pending requests
//! (listings of our, foreign and garbage names, node data of live and
//! persistent nodes, errors, replies of the wrong kind), duplicated and
//! never-issued replies, watch events on the queue and its nodes, every
//! session event, time passing, and a close.
//!
//! The machine must not panic, and its promises hold after every input:
//! every report is a well-formed queue (each node once, a name of the
//! queue, holders as [`Recipe::holders`] says for that order) that differs
//! from the one before; a timer fired at `now` is next due after `now`; a
//! closed or failed observer asks for nothing more; a reply of another kind
//! than its request stops the observer (or is dropped as stale).

use std::collections::BTreeSet;

use zkelect_core::name;
use zkelect_core::{
    Command, Input, Interop, Notice, Observer, ObserverConfig, OpId, Participant, Recipe, Reply,
    Request, SessionEvent, Stat, Timestamp, WatchEvent, ZkCode,
};

use crate::candidate::{session_event, sleep_ms, watch_kind, CODES};
use crate::read::Bytes;

const PATH: &str = "/svc/q";

fn config(b: &mut Bytes<'_>) -> ObserverConfig {
    let k = 1 + u32::from(b.u8() % 3);
    let recipe = match b.u8() % 4 {
        0 => Recipe::Election { leaders: k },
        1 => Recipe::Mutex,
        2 => Recipe::Semaphore { permits: k },
        _ => Recipe::ReadWrite,
    };
    let mut config = ObserverConfig::new(PATH, recipe);
    match b.u8() % 4 {
        0 => config = config.with_interop(b.pick(&Interop::ALL)),
        1 => config = config.with_prefix(b.pick(&["n_", "job-", "x"])),
        _ => {}
    }
    config
}

/// A child name: the queue's (any stem it reads, protected or not), a
/// foreign library's, or anything.
fn child(b: &mut Bytes<'_>, config: &ObserverConfig) -> String {
    let seq = match b.u8() % 4 {
        0 => b.seq(),
        _ => i32::from(b.u8() % 24),
    };
    let stems = config.recipe().stems(config.interop());
    let stem = match b.u8() % 5 {
        0 if !stems.is_empty() => b.pick(&stems).0.to_owned(),
        1 => b
            .pick(&["n_", "r_", "w_", "latch-", "__lock__", "__rlock__", "lock-"])
            .to_owned(),
        2 => return b.text(16),
        _ => config.prefix().to_owned(),
    };
    match b.u8() % 3 {
        0 => format!("_c_{:016x}-{stem}{seq:010}", b.u8()),
        _ => format!("{stem}{seq:010}"),
    }
}

fn reply(b: &mut Bytes<'_>, request: &Request, config: &ObserverConfig) -> Result<Reply, ZkCode> {
    let stat = |b: &mut Bytes<'_>| Stat {
        czxid: i64::from(b.u16()),
        ephemeral_owner: i64::from(b.u8() % 3),
        version: i32::from(b.u8() % 3),
        ..Stat::default()
    };
    match b.u8() % 10 {
        0 | 1 => return Err(b.pick(&CODES)),
        2 => {
            return Ok(match b.u8() % 3 {
                0 => Reply::Children(vec![]),
                1 => Reply::Deleted,
                _ => Reply::Exists(None),
            })
        }
        _ => {}
    }
    Ok(match request {
        Request::GetChildren { .. } => {
            Reply::Children((0..b.below(10)).map(|_| child(b, config)).collect())
        }
        Request::GetData { .. } => {
            let data = match b.u8() % 3 {
                0 => b.text(12).into_bytes(),
                _ => format!("id{}\ndata", b.u8()).into_bytes(),
            };
            Reply::Data {
                data,
                stat: stat(b),
            }
        }
        Request::Exists { .. } => Reply::Exists(b.bool().then(|| stat(b))),
        Request::Create { path, .. } => Reply::Created {
            path: path.clone(),
            stat: stat(b),
        },
        Request::Delete { .. } => Reply::Deleted,
        Request::SetData { .. } => Reply::Set(stat(b)),
        Request::Sync { .. } => Reply::Synced,
    })
}

struct World {
    o: Observer,
    now: Timestamp,
    pending: Vec<Command>,
    answered: Vec<(OpId, Result<Reply, ZkCode>)>,
    last: Option<Vec<Participant>>,
    done: bool,
}

impl World {
    fn drain_and_check(&mut self) {
        let config = self.o.config().clone();
        while let Some(notice) = self.o.poll_notice() {
            let Notice::Participants(list) = notice else {
                continue;
            };
            assert_ne!(
                Some(&list),
                self.last.as_ref(),
                "a report repeats the last one"
            );
            let names: BTreeSet<&str> = list.iter().map(|p| p.node.as_str()).collect();
            assert_eq!(names.len(), list.len(), "a node listed twice: {list:?}");
            let mut queue = Vec::new();
            for p in &list {
                let parsed =
                    name::parse(&p.node, config.prefix(), config.interop(), config.recipe());
                let parsed =
                    parsed.unwrap_or_else(|| panic!("{} is not a name of the queue", p.node));
                assert_eq!(parsed.access, p.access, "{}", p.node);
                queue.push(parsed);
            }
            let holders = config.recipe().holders(&queue);
            let holds: Vec<usize> = (0..list.len()).filter(|&i| list[i].holds).collect();
            assert_eq!(holds, holders, "holders of {list:?}");
            self.last = Some(list);
        }
        let mut asked = false;
        while let Some(cmd) = self.o.poll_command() {
            asked = true;
            self.pending.push(cmd);
        }
        if self.done {
            assert!(!asked, "a closed or failed observer sent a request");
        }
        self.done |= self.o.is_closed() || self.o.is_failed();
    }

    fn step(&mut self, b: &mut Bytes<'_>) {
        match b.u8() % 16 {
            0..=6 => {
                if self.pending.is_empty() {
                    return;
                }
                let cmd = self.pending.remove(b.below(self.pending.len()));
                let result = reply(b, &cmd.request, self.o.config());
                let wrong = matches!(&result, Ok(r) if r.kind() != cmd.request.kind());
                let (live, stale) = (!self.done, self.o.stats().stale_replies);
                self.answered.push((cmd.op, result.clone()));
                self.o.handle(self.now, Input::Reply { op: cmd.op, result });
                if wrong && live {
                    assert!(
                        self.o.is_failed() || self.o.stats().stale_replies == stale + 1,
                        "a reply of another kind than its request was taken: {cmd:?}"
                    );
                }
            }
            7 => {
                if self.answered.is_empty() {
                    return;
                }
                let (op, result) = self.answered[b.below(self.answered.len())].clone();
                self.o.handle(self.now, Input::Reply { op, result });
            }
            8 => self.o.handle(
                self.now,
                Input::Reply {
                    op: OpId(b.u64()),
                    result: Ok(Reply::Children(vec![])),
                },
            ),
            9 | 10 => {
                let path = match b.u8() % 3 {
                    0 => PATH.to_owned(),
                    1 => format!("{PATH}/{}", child(b, &self.o.config().clone())),
                    _ => b.text(20),
                };
                let kind = watch_kind(b);
                self.o
                    .handle(self.now, Input::Watch(WatchEvent { kind, path }));
            }
            11 | 12 => {
                let event = session_event(b);
                self.o.handle(self.now, Input::Session(event));
            }
            13 | 14 => {
                self.now = Timestamp::from_millis(self.now.as_millis().saturating_add(sleep_ms(b)));
                self.o.handle_timeout(self.now);
                if let Some(at) = self.o.poll_timeout() {
                    assert!(
                        at > self.now,
                        "poll_timeout {at} is not after handle_timeout({})",
                        self.now
                    );
                }
            }
            _ => {
                if b.u8() % 8 == 0 {
                    self.o.close(self.now);
                }
            }
        }
    }
}

/// The target: see the module docs.
pub fn run(data: &[u8]) {
    let mut b = Bytes::new(data);
    let Ok(o) = Observer::new(config(&mut b)) else {
        return;
    };
    let mut w = World {
        o,
        now: Timestamp::ZERO,
        pending: Vec::new(),
        answered: Vec::new(),
        last: None,
        done: false,
    };
    w.o.handle(
        w.now,
        Input::Session(SessionEvent::Connected {
            session_id: None,
            timeout: std::time::Duration::from_secs(3),
        }),
    );
    w.drain_and_check();
    let mut steps = 0;
    while !b.is_empty() && steps < 400 {
        w.step(&mut b);
        w.drain_and_check();
        steps += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_short_inputs_run() {
        run(&[]);
        run(&[3, 0, 0]);
        run(&[0x5A; 80]);
    }
}
