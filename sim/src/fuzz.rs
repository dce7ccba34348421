//! The fuzz entry: arbitrary bytes → a scenario (fault plan, world around the
//! candidates) plus the world's choices (the input interleaving) → the
//! simulator with every checker.
//!
//! A coverage-guided fuzzer (cargo-fuzz / libFuzzer, see `sim/fuzz/`) mutates
//! the bytes; on stable, `tests/fuzz.rs` replays every file of
//! `sim/fuzz/corpus/` as a plain test. The corpus holds every canary's
//! minimised case (`canary-<flag>.bin`): with that canary each must be caught
//! by its checker, and with the real candidate it must pass.
//!
//! ## The byte format
//!
//! Every field reads whole bytes through [`arbitrary::Unstructured`], so a
//! case can be written back ([`FuzzCase::encode`]) and a minimised swarm seed
//! turned into a corpus file. A short input is not an error: missing bytes
//! read as zero (a small, calm scenario).
//!
//! | bytes | field |
//! |---|---|
//! | 8 | seed (knobs, foreign contenders' names; LE) |
//! | 1 each | candidates − 1 (mod 20), leaders − 1 (mod 2), timeout/100 − 20 (mod 41), policy (bit 0; bit 1 the seed's hosting; bits 2–3 a bad chroot, 1 missing or 2 ephemeral, followed by 3 bytes: a bit per candidate whose session has it; bit 4 the seed's late start), chaos s − 5 (mod 26), reorder, pauses |
//! | 1 + 1 + 1 + n + 1 + 4 | interop (mod 3), foreign (mod 5), n look-alikes (n mod 5, a scheme each), server limits (mod 4: none, max a, min a, min a and max ≥ a) and a, b in ms (1 s + LE mod 7,001) |
//! | 1 + 8 per entry | plan length (mod 64; fewer if the bytes run out); each entry: at ms (2, LE, mod the chaos phase), fault kind (1), pid (1), ms (2), extra ms or flag (2) |
//! | 1 | the world's choices and the servers: bit 0 even → the bytes that follow ([`ByteStream`]), odd → the seed's stream (as the swarm); (byte >> 1) mod 3: 0 one server, 1 an ensemble of 3, 2 of 5 |
//! | 1 + 6 per entry | with an ensemble only: its member faults (mod 64; fewer if the bytes run out); each: at ms (2, LE, mod the chaos phase), kind (1, mod 3: lag, cut-off, new leader), member (1, mod the members), ms (2, LE, mod 2 T + 1; a lag's mod 1,001) |
//! | 1 + 1 + 2 | with an ensemble only: a member down at start (0 none; else how, (b − 1) mod 3: stopped, frozen, unresolvable), the member (1 + b mod (members − 1)), until ms (2, LE; 0 never) |
//! | 1 + 1 | with an ensemble only: a member with a lower `maxSessionTimeout` (0 none; else the member, (b − 1) mod members), and its maximum in tenths of a second (1 s at least; the world keeps it within the member's limits, and a world whose knobs run zookeeper-client drops it) |
//! | rest | the world's choices |
//!
//! Scenarios the swarm never draws because they are refused or unlivable
//! (pauses with k > 1, interop with k > 1, foreign models without interop,
//! faults foreign models cannot live with) are normalised away, as
//! `tests/plans.rs` does.

use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use zkelect_core::{ConnectionPolicy, Timestamp};

use crate::canary::Canary;
use crate::check;
use crate::choice::{ByteStream, Choices};
use crate::run::RunReport;
use crate::server::{DownHow, EnsembleSpec, Lowered, MemberDown, MemberFault};
use crate::swarm::{BadChroot, ChrootRoot, Env, Fault, Hosting, Queue, Scheme, Swarm};
use crate::world::World;

/// Where a fuzz case's world takes its choices from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorldChoices {
    /// The seed's stream, as a swarm run (how canary cases replay their seed).
    Seeded,
    /// These bytes (then the smallest answers).
    Bytes(Vec<u8>),
}

/// One decoded fuzz input.
#[derive(Debug, Clone, PartialEq)]
pub struct FuzzCase {
    /// The seed: knobs and names (and the world's choices when [`WorldChoices::Seeded`]).
    pub seed: u64,
    /// The scenario.
    pub swarm: Swarm,
    /// The world's choices.
    pub world: WorldChoices,
}

const FAULT_KINDS: u8 = 22;

fn byte(u: &mut Unstructured<'_>) -> u8 {
    u8::arbitrary(u).unwrap_or(0)
}

fn u16le(u: &mut Unstructured<'_>) -> u16 {
    u16::from_le_bytes([byte(u), byte(u)])
}

fn scheme(b: u8) -> Scheme {
    Scheme::ALL[usize::from(b % 3)]
}

fn scheme_byte(s: Scheme) -> u8 {
    match s {
        Scheme::Ours => 0,
        Scheme::Curator => 1,
        Scheme::Kazoo => 2,
    }
}

/// Decodes one fault: kind, pid, ms, and a last field (extra ms or a flag).
/// Durations stay within what the swarm draws for a requested timeout of `t`
/// ms (cuts, pauses and slow links at most 2 t, a server restart t / 2,
/// lagging events 3 t, a slow link's extra latency t / 4), which the liveness
/// bound (2 t + 4 s after the faults stop) is made for.
fn fault(kind: u8, pid: u8, ms: u16, extra: u16, t: u64) -> Fault {
    let pid = usize::from(pid);
    let raw = u64::from(ms);
    let ms = raw % (2 * t + 1);
    let flag = extra & 1 == 1;
    match kind % FAULT_KINDS {
        0 => Fault::DropConnection { pid, applied: flag },
        1 => Fault::Partition { pid, ms },
        2 => Fault::PartitionOneWay {
            pid,
            ms,
            to_server: flag,
        },
        3 => Fault::Pause { pid, ms },
        4 => Fault::Crash { pid },
        5 => Fault::RestartServer {
            ms: raw % (t / 2 + 1),
        },
        6 => Fault::Resign { pid, rejoin: flag },
        7 => Fault::Close { pid },
        8 => Fault::Spawn,
        9 => Fault::CrashLeader,
        10 => Fault::PartitionLeader { ms },
        11 => Fault::CloseLeader,
        12 => Fault::PauseLeader { ms },
        13 => Fault::Revoke { pid },
        14 => Fault::RevokeLeader,
        15 => Fault::WipeElection,
        16 => Fault::TouchData { pid },
        17 => Fault::LagEvents {
            pid,
            ms: raw % (3 * t + 1),
        },
        18 => Fault::Lookalike {
            scheme: scheme(extra as u8),
        },
        19 => Fault::SpawnForeign,
        20 => Fault::Delay {
            pid,
            ms,
            extra_ms: u64::from(extra) % (t / 4 + 1),
        },
        21 => Fault::AskRevoke { pid },
        _ => Fault::DropConnection { pid, applied: flag },
    }
}

/// The bytes `fault` decodes from (kind, pid, ms, extra); values past a
/// field's width are clamped.
fn fault_bytes(f: &Fault) -> (u8, u8, u16, u16) {
    let p = |pid: &usize| u8::try_from(*pid).unwrap_or(u8::MAX);
    let m = |ms: &u64| u16::try_from(*ms).unwrap_or(u16::MAX);
    match f {
        Fault::DropConnection { pid, applied } => (0, p(pid), 0, u16::from(*applied)),
        Fault::Partition { pid, ms } => (1, p(pid), m(ms), 0),
        Fault::PartitionOneWay { pid, ms, to_server } => (2, p(pid), m(ms), u16::from(*to_server)),
        Fault::Pause { pid, ms } => (3, p(pid), m(ms), 0),
        Fault::Crash { pid } => (4, p(pid), 0, 0),
        Fault::RestartServer { ms } => (5, 0, m(ms), 0),
        Fault::Resign { pid, rejoin } => (6, p(pid), 0, u16::from(*rejoin)),
        Fault::Close { pid } => (7, p(pid), 0, 0),
        Fault::Spawn => (8, 0, 0, 0),
        Fault::CrashLeader => (9, 0, 0, 0),
        Fault::PartitionLeader { ms } => (10, 0, m(ms), 0),
        Fault::CloseLeader => (11, 0, 0, 0),
        Fault::PauseLeader { ms } => (12, 0, m(ms), 0),
        Fault::Revoke { pid } => (13, p(pid), 0, 0),
        Fault::RevokeLeader => (14, 0, 0, 0),
        Fault::WipeElection => (15, 0, 0, 0),
        Fault::TouchData { pid } => (16, p(pid), 0, 0),
        Fault::LagEvents { pid, ms } => (17, p(pid), m(ms), 0),
        Fault::Lookalike { scheme } => (18, 0, 0, u16::from(scheme_byte(*scheme))),
        Fault::SpawnForeign => (19, 0, 0, 0),
        Fault::Delay { pid, ms, extra_ms } => (20, p(pid), m(ms), m(extra_ms)),
        Fault::AskRevoke { pid } => (21, p(pid), 0, 0),
    }
}

/// The queue's byte: 0 and 1 an election with k = 1 or 2 (the format from
/// when every seed was an election, so old corpus files keep their meaning); from 2 on, the low two
/// bits of `b - 2` pick the recipe and the rest its parameter (an
/// election's k − 1, a semaphore's k − 2, a read-write lock's writers in
/// tens − 1).
fn queue_byte(queue: Queue, k: u32) -> u8 {
    let param = |p: u32| (p.min(60) as u8) * 4;
    match queue {
        Queue::Election if k <= 2 => (k.max(1) - 1) as u8,
        Queue::Election => 2 + param(k - 1),
        Queue::Mutex => 3,
        Queue::Semaphore => 4 + param(k.max(2) - 2),
        Queue::ReadWrite { writers } => 5 + param(u32::from(writers / 10).max(1) - 1),
    }
}

/// The inverse of [`queue_byte`], for any byte: the queue and its k.
fn queue_of(b: u8) -> (Queue, u32) {
    if b < 2 {
        return (Queue::Election, u32::from(b) + 1);
    }
    let (kind, param) = ((b - 2) % 4, u32::from((b - 2) / 4));
    match kind {
        0 => (Queue::Election, param % 5 + 1),
        1 => (Queue::Mutex, 1),
        2 => (Queue::Semaphore, param % 4 + 2),
        _ => (
            Queue::ReadWrite {
                writers: (param % 9 + 1) as u8 * 10,
            },
            1,
        ),
    }
}

/// Decodes an ensemble of `servers` and its member faults (see the format).
fn ensemble(u: &mut Unstructured<'_>, servers: usize, chaos: Duration, t: u64) -> EnsembleSpec {
    let mut faults = Vec::new();
    for _ in 0..byte(u) % 64 {
        if u.is_empty() {
            break;
        }
        let at = Timestamp::from_millis(u64::from(u16le(u)) % (chaos.as_millis() as u64 + 1));
        let (kind, server) = (byte(u) % 3, usize::from(byte(u)) % servers);
        let ms = u64::from(u16le(u)) % (2 * t + 1);
        let fault = match kind {
            0 => MemberFault::Lag {
                server,
                ms: ms % (crate::server::LAG_MAX.as_millis() as u64 + 1),
            },
            1 => MemberFault::CutOff { server, ms },
            _ => MemberFault::NewLeader { server },
        };
        faults.push((at, fault));
    }
    faults.sort_by_key(|(at, _)| *at);
    // A member down at start: 0 none, else how ((b - 1) mod 3), the member
    // (mod the members but the first leader), until (2, LE: 0 never).
    let down_at_start = match byte(u) {
        0 => None,
        b => {
            let how = match (b - 1) % 3 {
                0 => DownHow::Stopped,
                1 => DownHow::Frozen,
                _ => DownHow::Unresolvable,
            };
            let server = 1 + usize::from(byte(u)) % (servers - 1).max(1);
            let until = match u16le(u) {
                0 => None,
                _ if how == DownHow::Unresolvable => None,
                ms => Some(Timestamp::from_millis(u64::from(ms))),
            };
            Some(MemberDown { server, how, until })
        }
    };
    let lowered = match byte(u) {
        0 => None,
        b => {
            let server = usize::from(b - 1) % servers;
            let max = (u64::from(byte(u)) * 100).max(1_000);
            Some(Lowered {
                server,
                max: Duration::from_millis(max),
            })
        }
    };
    EnsembleSpec {
        servers,
        faults,
        down_at_start,
        lowered,
    }
}

/// Drops what the foreign models of `env` cannot live with (as the swarm does).
fn fits(env: &Env, pauses: bool, fault: &Fault) -> bool {
    let curator = env.library() == Some(Scheme::Curator);
    match fault {
        Fault::SpawnForeign => env.library().is_some(),
        Fault::Lookalike { scheme } => env.lookalike_schemes().contains(scheme),
        Fault::TouchData { .. } | Fault::AskRevoke { .. } | Fault::WipeElection => !curator,
        Fault::Pause { .. } | Fault::PauseLeader { .. } => pauses,
        _ => true,
    }
}

/// Makes a decoded scenario one the library accepts and the swarm could
/// draw: interop elects one leader; foreign models need an interop scheme;
/// faults in time order, inside the chaos phase. (Pauses come with any
/// queue: `safety` judges them by lease.)
/// Leaves a swarm drawn by [`Swarm::from_seed`] as it is.
pub fn normalize(swarm: &mut Swarm) {
    let (queue, k) = (swarm.env.queue, swarm.leaders);
    swarm.set_queue(queue, k);
    if swarm.leaders > 1 {
        swarm.env.interop = Scheme::Ours;
    }
    if swarm.env.interop == Scheme::Ours || swarm.leaders > 1 {
        swarm.env.foreign = 0;
    }
    let allowed = swarm.env.lookalike_schemes();
    swarm.env.lookalikes.retain(|s| allowed.contains(s));
    let (env, pauses) = (swarm.env.clone(), swarm.pauses);
    swarm.plan.retain(|(_, f)| fits(&env, pauses, f));
    let chaos = swarm.chaos.as_millis() as u64;
    for (at, _) in &mut swarm.plan {
        *at = Timestamp::from_millis(at.as_millis().min(chaos));
    }
    swarm.plan.sort_by_key(|(at, _)| *at);
}

impl<'a> Arbitrary<'a> for FuzzCase {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let mut seed = [0u8; 8];
        for b in &mut seed {
            *b = byte(u);
        }
        let seed = u64::from_le_bytes(seed);
        let candidates = usize::from(byte(u) % 20) + 1;
        let (queue, leaders) = queue_of(byte(u));
        let timeout_ms = (u64::from(byte(u) % 41) + 20) * 100;
        let policy_byte = byte(u);
        // Bit 1 of the policy byte: the seed's hosting (shared
        // sessions, observers), drawn from the seed as the swarm draws it.
        let hosted = policy_byte & 2 != 0;
        // Bits 2–3: a bad chroot (1 missing, 2 ephemeral), then three bytes
        // of its sessions (a bit per candidate pid); bit 4: the seed's late
        // start. Zero in every older file, which reads no more bytes.
        let chroot_root = match (policy_byte >> 2) & 3 {
            1 => Some(ChrootRoot::Missing),
            2 => Some(ChrootRoot::Ephemeral),
            _ => None,
        };
        let chroot_mask = match chroot_root {
            Some(_) => u32::from_le_bytes([byte(u), byte(u), byte(u), 0]),
            None => 0,
        };
        let late = policy_byte & 16 != 0;
        let policy = if policy_byte % 2 == 1 {
            ConnectionPolicy::SessionAware
        } else {
            ConnectionPolicy::Standard
        };
        let chaos = Duration::from_secs(u64::from(byte(u) % 26) + 5);
        let reorder = byte(u) % 2 == 1;
        let pauses = byte(u) % 2 == 1;
        let interop = scheme(byte(u));
        let foreign = usize::from(byte(u) % 5);
        let lookalikes = (0..byte(u) % 5).map(|_| scheme(byte(u))).collect();
        let limits = byte(u) % 4;
        // As the swarm draws them: a maximum of at least 1 s, a minimum of
        // at most 8 s (a server whose minimum is above its maximum is a
        // configuration ZooKeeper refuses).
        let a = Duration::from_millis(1_000 + u64::from(u16le(u)) % 7_001);
        let b = Duration::from_millis(1_000 + u64::from(u16le(u)) % 7_001);
        let (min_session_timeout, max_session_timeout) = match limits {
            1 => (None, Some(a)),
            2 => (Some(a), None),
            3 => (Some(a), Some(a.max(b))),
            _ => (None, None),
        };
        let mut plan = Vec::new();
        // Up to 255 (63 before pauses met lag; every corpus
        // file has at most 63, so its bytes keep their meaning).
        for _ in 0..byte(u) {
            // Out of bytes, out of faults (not a run of zeroed ones).
            if u.is_empty() {
                break;
            }
            let at = Timestamp::from_millis(u64::from(u16le(u)) % (chaos.as_millis() as u64 + 1));
            let (kind, pid, ms, extra) = (byte(u), byte(u), u16le(u), u16le(u));
            plan.push((at, fault(kind, pid, ms, extra, timeout_ms)));
        }
        let mut swarm = Swarm {
            candidates,
            leaders,
            session_timeout: Duration::from_millis(timeout_ms),
            policy,
            chaos,
            reorder,
            pauses,
            plan,
            env: Env {
                interop,
                foreign,
                lookalikes,
                min_session_timeout,
                max_session_timeout,
                queue,
                hosting: if hosted {
                    Hosting::draw(seed, candidates)
                } else {
                    Hosting::default()
                },
                ensemble: None,
                chroot: None,
                late_start: late.then(|| Swarm::late_start_of(seed)),
                // Not drawn from a fuzz entry's bytes (they keep their
                // meaning); seeds draw it.
                refusal: None,
                acl_change: None,
            },
        };
        if let Some(root) = chroot_root {
            let hosts: Vec<usize> = (0..candidates.min(24))
                .filter(|&p| chroot_mask & (1 << p) != 0 && swarm.env.hosting.host(p) == p)
                .collect();
            if !hosts.is_empty() {
                swarm.env.chroot = Some(BadChroot { root, hosts });
            }
        }
        normalize(&mut swarm);
        let choices = byte(u);
        swarm.env.ensemble = match (choices >> 1) % 3 {
            0 => None,
            code => Some(ensemble(
                u,
                if code == 1 { 3 } else { 5 },
                chaos,
                timeout_ms,
            )),
        };
        let world = if choices % 2 == 1 {
            WorldChoices::Seeded
        } else {
            let rest = u.len();
            WorldChoices::Bytes(u.bytes(rest)?.to_vec())
        };
        Ok(Self { seed, swarm, world })
    }
}

impl FuzzCase {
    /// Decodes `bytes` (any bytes decode).
    pub fn decode(bytes: &[u8]) -> Self {
        let mut u = Unstructured::new(bytes);
        match Self::arbitrary(&mut u) {
            Ok(case) => case,
            // `arbitrary` above never fails: every read falls back to zero.
            Err(_) => Self::decode(&[]),
        }
    }

    /// The bytes this case decodes from (fields clamped to what the format
    /// holds: 1–20 candidates, k ≤ 2, 2–6 s timeouts, 5–30 s of chaos, 4
    /// look-alikes, 255 faults, 16-bit milliseconds, limits of 1–8 s).
    pub fn encode(&self) -> Vec<u8> {
        let s = &self.swarm;
        let mut out = self.seed.to_le_bytes().to_vec();
        let ms16 = |d: Duration| u16::try_from(d.as_millis()).unwrap_or(u16::MAX);
        out.push((s.candidates.clamp(1, 20) - 1) as u8);
        out.push(queue_byte(s.env.queue, s.leaders));
        out.push((s.session_timeout.as_millis() / 100).clamp(20, 60) as u8 - 20);
        // Hosting travels as one bit: the seed's own draw, or none.
        let hosted = s.env.hosting != Hosting::default()
            && s.env.hosting == Hosting::draw(self.seed, s.candidates);
        let root = match &s.env.chroot {
            None => 0,
            Some(bad) if bad.root == ChrootRoot::Missing => 1,
            Some(_) => 2,
        };
        let late = s
            .env
            .late_start
            .is_some_and(|l| l == Swarm::late_start_of(self.seed));
        out.push(
            u8::from(s.policy == ConnectionPolicy::SessionAware)
                | (u8::from(hosted) << 1)
                | (root << 2)
                | (u8::from(late) << 4),
        );
        if let Some(bad) = &s.env.chroot {
            let mask = bad
                .hosts
                .iter()
                .filter(|&&p| p < 24)
                .fold(0u32, |m, &p| m | (1 << p));
            out.extend(&mask.to_le_bytes()[..3]);
        }
        out.push(s.chaos.as_secs().clamp(5, 30) as u8 - 5);
        out.push(u8::from(s.reorder));
        out.push(u8::from(s.pauses));
        out.push(scheme_byte(s.env.interop));
        out.push(s.env.foreign.min(4) as u8);
        let lookalikes = &s.env.lookalikes[..s.env.lookalikes.len().min(4)];
        out.push(lookalikes.len() as u8);
        out.extend(lookalikes.iter().map(|l| scheme_byte(*l)));
        let limit = |d: Duration| ms16(d).saturating_sub(1_000);
        let (limits, a, b) = match (s.env.min_session_timeout, s.env.max_session_timeout) {
            (None, Some(max)) => (1, limit(max), 0),
            (Some(min), None) => (2, limit(min), 0),
            (Some(min), Some(max)) => (3, limit(min), limit(max)),
            (None, None) => (0, 0, 0),
        };
        out.push(limits);
        out.extend(a.to_le_bytes());
        out.extend(b.to_le_bytes());
        let plan = &s.plan[..s.plan.len().min(255)];
        out.push(plan.len() as u8);
        for (at, f) in plan {
            let at = u16::try_from(at.as_millis()).unwrap_or(u16::MAX);
            let (kind, pid, ms, extra) = fault_bytes(f);
            out.extend(at.to_le_bytes());
            out.push(kind);
            out.push(pid);
            out.extend(ms.to_le_bytes());
            out.extend(extra.to_le_bytes());
        }
        let servers = match &s.env.ensemble {
            None => 0,
            Some(spec) if spec.servers <= 3 => 2,
            Some(_) => 4,
        };
        let seeded = u8::from(self.world == WorldChoices::Seeded);
        out.push(servers | seeded);
        if let Some(spec) = &s.env.ensemble {
            let faults = &spec.faults[..spec.faults.len().min(63)];
            out.push(faults.len() as u8);
            for (at, f) in faults {
                let at = u16::try_from(at.as_millis()).unwrap_or(u16::MAX);
                let (kind, server, ms) = match *f {
                    MemberFault::Lag { server, ms } => (0, server, ms),
                    MemberFault::CutOff { server, ms } => (1, server, ms),
                    MemberFault::NewLeader { server } => (2, server, 0),
                };
                out.extend(at.to_le_bytes());
                out.push(kind);
                out.push(u8::try_from(server).unwrap_or(u8::MAX));
                out.extend(u16::try_from(ms).unwrap_or(u16::MAX).to_le_bytes());
            }
            match spec.down_at_start {
                None => out.push(0),
                Some(down) => {
                    out.push(match down.how {
                        DownHow::Stopped => 1,
                        DownHow::Frozen => 2,
                        DownHow::Unresolvable => 3,
                    });
                    out.push(u8::try_from(down.server.saturating_sub(1)).unwrap_or(u8::MAX));
                    let until = down.until.map_or(0, |at| {
                        u16::try_from(at.as_millis()).unwrap_or(u16::MAX).max(1)
                    });
                    out.extend(until.to_le_bytes());
                }
            }
            match spec.lowered {
                None => out.push(0),
                Some(l) => {
                    out.push(u8::try_from(l.server + 1).unwrap_or(u8::MAX));
                    out.push(u8::try_from(l.max.as_millis() / 100).unwrap_or(u8::MAX));
                }
            }
        }
        if let WorldChoices::Bytes(bytes) = &self.world {
            out.extend(bytes);
        }
        out
    }

    /// Runs the case with every checker (and `canary` instead of the real
    /// candidate, if given).
    pub fn run(&self, canary: Option<Canary>) -> RunReport {
        let options = crate::run::RunOptions {
            canary,
            ..Default::default()
        };
        let world = self.world(canary, false);
        crate::run::report(self.seed, world, options, || {
            let mut readable = self.world(canary, true);
            readable.run();
            readable
        })
    }

    fn world(&self, canary: Option<Canary>, keep_trace: bool) -> World {
        let choices = match &self.world {
            WorldChoices::Seeded => Choices::seeded(self.seed),
            WorldChoices::Bytes(bytes) => Choices::Bytes(ByteStream::new(bytes.clone())),
        };
        World::with_choices(
            self.seed,
            self.swarm.clone(),
            canary,
            keep_trace,
            check::standard(),
            choices,
        )
    }
}

/// The fuzz target: decodes `bytes`, runs them with the real candidate, and
/// panics (a finding, for the fuzzer) with the failure report if a checker fails.
pub fn fuzz_one(bytes: &[u8]) {
    let case = FuzzCase::decode(bytes);
    let report = case.run(None);
    if let Some(v) = &report.violation {
        panic!("fuzz case broke {}:\n{report}\ncase: {case:?}", v.invariant);
    }
}
