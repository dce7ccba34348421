//! The world's settings and the `ConfigBuilder` options a seed draws, each
//! from a stream of its own.

use std::fmt;
use std::time::Duration;

use zkelect_core::{Acl, AclEntry, ConfigBuilder, Perms, Rule, Takeover, WatchStrategy};

use crate::rng::SimRng;

/// Settings the seed draws for the world besides the [`Swarm`](super::Swarm) (kept apart so
/// that a hand-built `Swarm`, as the demo builds one, stays as it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Knobs {
    /// The `cversion` new nodes start with: near 2^31 for one seed in seven, so
    /// sequence numbers wrap to negative ones during the run.
    pub cversion_start: i32,
    /// Whether the election's parent is a container node (removed by the server
    /// when its last child goes, created again by the next candidate).
    pub container_parent: bool,
    /// The ACL of the candidates' nodes and the identities of the sessions.
    pub acl: AclDraw,
    /// Whether the client library reports the session id on connecting (the Java
    /// client does; zookeeper-async does not, and the core then learns it from
    /// its node's `ephemeralOwner`).
    pub session_ids: bool,
    /// The other `ConfigBuilder` options ([`Options::draw`]; the defaults in
    /// canary runs, whose hazards were shaped without them).
    pub options: Options,
}

impl Knobs {
    /// Draws the knobs for `seed` (from a stream of their own, so adding a knob
    /// does not change the scenario a seed picks); with `wrap` the sequence
    /// counter always starts near 2^31 (a canary that needs it,
    /// [`Canary::wants_wrap`](crate::canary::Canary::wants_wrap)).
    pub fn from_seed(seed: u64, wrap: bool) -> Self {
        let mut rng = SimRng::new(seed, 3);
        let wrap = rng.chance(1.0 / 7.0) || wrap;
        let near = rng.range(0, 30) as i32;
        let mut knobs = Self {
            cversion_start: if wrap { i32::MAX - near } else { 0 },
            container_parent: rng.chance(0.25),
            acl: if rng.chance(0.25) {
                AclDraw::CreatorAllWorldRead
            } else {
                AclDraw::Open
            },
            session_ids: rng.chance(0.7),
            options: Options::draw(seed),
        };
        // Drawn last, so every earlier draw of a seed stays put: 1 in 5 of
        // the open seeds take a custom list instead.
        if knobs.acl == AclDraw::Open && rng.chance(0.2) {
            knobs.acl = if rng.chance(0.5) {
                AclDraw::Digests {
                    users: rng.range(1, 4) as u8,
                }
            } else {
                AclDraw::Ip
            };
        }
        knobs
    }
}

impl fmt::Display for Knobs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cversion_start={} container_parent={} acl={:?} session_ids={} {}",
            self.cversion_start, self.container_parent, self.acl, self.session_ids, self.options
        )
    }
}

/// The ACL a seed gives the queue's nodes, and so who its sessions
/// authenticate as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AclDraw {
    /// `world:anyone:cdrwa`; no session authenticates.
    Open,
    /// The creator may do anything, everyone may read; every session
    /// authenticates as the same service identity.
    CreatorAllWorldRead,
    /// A custom list ([`Acl::Custom`]): one `digest` entry with every
    /// permission per user, and `world:anyone:r`; process `p` authenticates
    /// as user `p % users` (operators as user 0).
    Digests {
        /// How many digest users (1–3).
        users: u8,
    },
    /// A custom list of one `ip` entry, `ip:127.0.0.0/8:cdrwa`: no session
    /// authenticates; every client connects from 127.0.0.1.
    Ip,
}

impl AclDraw {
    /// The digest id of user `n`: `u<n>:` and a base64 SHA-1 digest (made
    /// up, but of the form the server stores).
    fn digest_id(n: usize) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut x = (n as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut hash: String = (0..26)
            .map(|_| {
                x = x.rotate_left(7).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                ALPHABET[(x >> 58) as usize] as char
            })
            .collect();
        // The last character carries two bits past the digest: zero.
        hash.push('A');
        hash.push('=');
        format!("u{n}:{hash}")
    }

    /// The list the candidates create their nodes with.
    pub fn acl(self) -> Acl {
        match self {
            Self::Open => Acl::Open,
            Self::CreatorAllWorldRead => Acl::CreatorAllWorldRead,
            Self::Digests { users } => {
                let mut list: Vec<AclEntry> = (0..usize::from(users))
                    .filter_map(|n| AclEntry::new("digest", &Self::digest_id(n), Perms::ALL).ok())
                    .collect();
                list.push(AclEntry::anyone(Perms::READ));
                Acl::Custom(list)
            }
            Self::Ip => Acl::Custom(
                AclEntry::new("ip", "127.0.0.0/8", Perms::ALL)
                    .into_iter()
                    .collect(),
            ),
        }
    }

    /// Whether sessions authenticate (send credentials a server may refuse).
    pub fn authenticates(self) -> bool {
        matches!(self, Self::CreatorAllWorldRead | Self::Digests { .. })
    }

    /// The identity process `pid`'s sessions authenticate as (`scheme:id`),
    /// if any; `None` for `pid` means an operator's session.
    pub fn identity(self, pid: Option<usize>) -> Option<String> {
        match self {
            Self::Open | Self::Ip => None,
            Self::CreatorAllWorldRead => Some(IDENTITY.to_owned()),
            Self::Digests { users } => {
                let n = pid.unwrap_or(0) % usize::from(users.max(1));
                Some(format!("digest:{}", Self::digest_id(n)))
            }
        }
    }
}

/// The identity every session authenticates as when the candidates' ACL is
/// the creator's.
pub const IDENTITY: &str = "digest:svc";

/// The `ConfigBuilder` options a seed draws besides the rule, the policy, the
/// interop scheme, the ACL and the container parent: drawn from a
/// stream of their own ([`Options::draw`]), so the rest of the scenario stays
/// put; `Options::default()` is what every seed ran before.
///
/// Some are the queue's (every process must agree: a prefix, whether the
/// path exists before anyone joins, the retry delays); the others are drawn
/// per process ([`Options::process`]), so one queue mixes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// The node-name prefix of every zkelect process (`None`: the rule's stem).
    /// Applied only where the core takes one: without interop and outside a
    /// read-write lock, whose stems are fixed.
    pub prefix: Option<&'static str>,
    /// `create_parents`: when false the world creates the election path
    /// before anyone joins (and an operator's wipe creates it again), as an
    /// operator of such a deployment must.
    pub create_parents: bool,
    /// How many in a hundred processes watch the parent
    /// (`WatchStrategy::Parent`), by a hash of seed and pid.
    pub parent: u8,
    /// How many in a hundred processes take over as the other libraries do,
    /// listing again on the notification (`Takeover::Relist`: the nearest
    /// node below watched only, and a node's own watch set only once it is
    /// two probe ticks old); the others take over on the notification alone
    /// (`Takeover::OnNotification`, the default: the two-watch takeover).
    pub relist: u8,
    /// How many in a hundred processes run with `rejoin_on_revoke(false)`:
    /// revoked, they stay out (idle) for good.
    pub no_rejoin: u8,
    /// Bytes of application data (`data`) each process stores after its id.
    pub data: u16,
    /// `backoff(min, max)`, in milliseconds.
    pub backoff: (u64, u64),
    /// How many in a hundred of a semaphore's processes ask for more than
    /// one permit (`weight`, 2 to k, by a hash of seed and pid).
    pub weighted: u8,
    /// How many in a hundred processes are `revocable` (hear cooperative
    /// revocation requests, which the plan then writes into nodes).
    pub revocable: u8,
    /// How many in a hundred writers of a read-write lock downgrade to
    /// readers once they hold.
    pub downgrade: u8,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            prefix: None,
            create_parents: true,
            parent: 0,
            relist: 0,
            no_rejoin: 0,
            data: 0,
            backoff: (50, 2_000),
            weighted: 0,
            revocable: 0,
            downgrade: 0,
        }
    }
}

/// What [`Options::process`] draws for one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessOptions {
    /// Which node it watches.
    pub strategy: WatchStrategy,
    /// `takeover`.
    pub takeover: Takeover,
    /// `rejoin_on_revoke`.
    pub rejoin_on_revoke: bool,
    /// Asks for more than one permit, if its queue is a semaphore.
    pub weighted: bool,
    /// A number to pick its weight with (2 to k: `1 + 1 + pick % (k - 1)`).
    pub weight_pick: u32,
    /// `revocable`.
    pub revocable: bool,
    /// Downgrades to a reader once it holds, if it writes.
    pub downgrades: bool,
}

impl Options {
    /// The prefixes a seed may draw (`n_` is an election's own stem, and
    /// another recipe's prefix then).
    pub const PREFIXES: [&'static str; 4] = ["cand-", "x", "member_", "n_"];

    /// Draws the options for `seed` from a stream of their own: a prefix 1 in
    /// 4 seeds; the path created by the world (`create_parents(false)`) 1 in
    /// 5; the `Parent` strategy for 25, 50 or 100 % of processes 1 in 4;
    /// `Takeover::Relist` for 50 or 100 % 1 in 4; `rejoin_on_revoke(false)`
    /// for 30 or 100 % 1 in 4; 1–2,048 bytes of data 1 in 3; retry delays
    /// from 1, 10, 100 or 500 ms up to 0.5, 2 or 5 s 1 in 3 (else 50 ms – 2 s).
    pub fn draw(seed: u64) -> Self {
        let mut rng = SimRng::new(seed, 10);
        let mut o = Self::default();
        if rng.chance(0.25) {
            o.prefix = Some(Self::PREFIXES[rng.range(0, 3) as usize]);
        }
        o.create_parents = !rng.chance(0.2);
        if rng.chance(0.25) {
            o.parent = [25, 50, 100][rng.range(0, 2) as usize];
        }
        if rng.chance(0.25) {
            o.relist = [50, 100][rng.range(0, 1) as usize];
        }
        if rng.chance(0.25) {
            o.no_rejoin = [30, 100][rng.range(0, 1) as usize];
        }
        if rng.chance(1.0 / 3.0) {
            o.data = rng.range(1, 2_048) as u16;
        }
        if rng.chance(1.0 / 3.0) {
            let min = [1, 10, 100, 500][rng.range(0, 3) as usize];
            let max = [500, 2_000, 5_000][rng.range(0, 2) as usize];
            o.backoff = (min, max.max(min));
        }
        // Drawn last, so every earlier option of a seed stays put.
        if rng.chance(0.5) {
            o.weighted = [50, 100][rng.range(0, 1) as usize];
        }
        if rng.chance(1.0 / 3.0) {
            o.revocable = [50, 100][rng.range(0, 1) as usize];
        }
        if rng.chance(1.0 / 3.0) {
            o.downgrade = [50, 100][rng.range(0, 1) as usize];
        }
        o
    }

    /// How many permits process `pid` asks for under `rule` (1 unless its
    /// queue is a semaphore of k > 1 and it was drawn weighted).
    pub fn weight(&self, seed: u64, pid: usize, rule: Rule) -> u32 {
        let p = self.process(seed, pid);
        match rule {
            Rule::Semaphore { permits } if permits > 1 && p.weighted => {
                2 + p.weight_pick % (permits - 1)
            }
            _ => 1,
        }
    }

    /// The longest retry delay.
    pub fn backoff_max(&self) -> Duration {
        Duration::from_millis(self.backoff.1)
    }

    /// What process `pid` of `seed`'s world draws (a hash of seed and pid,
    /// so a spawned process draws too).
    pub fn process(&self, seed: u64, pid: usize) -> ProcessOptions {
        let mut rng = SimRng::new(seed ^ (pid as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15), 11);
        let mut below = |percent: u8| rng.range(0, 99) < u64::from(percent);
        let strategy = if below(self.parent) {
            WatchStrategy::Parent
        } else {
            WatchStrategy::Predecessor
        };
        let takeover = if below(self.relist) {
            Takeover::Relist
        } else {
            Takeover::OnNotification
        };
        let rejoin_on_revoke = !below(self.no_rejoin);
        // Drawn after the older ones, so theirs stay put.
        let weighted = below(self.weighted);
        let revocable = below(self.revocable);
        let downgrades = below(self.downgrade);
        ProcessOptions {
            strategy,
            takeover,
            rejoin_on_revoke,
            weighted,
            weight_pick: rng.range(0, 1_000) as u32,
            revocable,
            downgrades,
        }
    }

    /// `builder` with these options for process `pid` of `seed`'s world
    /// (`rule` its rule, `interop` whether it names its nodes in another
    /// library's scheme: then no prefix).
    pub fn configure(
        &self,
        mut builder: ConfigBuilder,
        seed: u64,
        pid: usize,
        rule: Rule,
        interop: bool,
    ) -> ConfigBuilder {
        let p = self.process(seed, pid);
        let weight = self.weight(seed, pid, rule);
        if weight > 1 {
            builder = builder.weight(weight);
        }
        builder = builder
            .revocable(p.revocable)
            .strategy(p.strategy)
            .takeover(p.takeover)
            .rejoin_on_revoke(p.rejoin_on_revoke)
            .create_parents(self.create_parents)
            .backoff(
                Duration::from_millis(self.backoff.0),
                Duration::from_millis(self.backoff.1),
            );
        if let Some(prefix) = self.prefix {
            if !interop && !matches!(rule, Rule::Read | Rule::Write) {
                builder = builder.prefix(prefix);
            }
        }
        if self.data > 0 {
            // Any bytes, a newline included: only the id's first `\n` splits.
            let data = data_bytes(seed, self.data);
            builder = builder.data(data);
        }
        builder
    }
}

impl fmt::Display for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "prefix={} create_parents={} parent={}% relist={}% no_rejoin={}% data={}B backoff={}..{}ms weighted={}% revocable={}% downgrade={}%",
            self.prefix.unwrap_or("-"),
            self.create_parents,
            self.parent,
            self.relist,
            self.no_rejoin,
            self.data,
            self.backoff.0,
            self.backoff.1,
            self.weighted,
            self.revocable,
            self.downgrade
        )
    }
}

/// A process's node data: byte i is (seed + 7·i) mod 251. Stepped rather
/// than divided per byte (the division was most of configuring a spawn),
/// unless the sum would wrap, where the two differ.
fn data_bytes(seed: u64, len: u16) -> Vec<u8> {
    if seed.checked_add(u64::from(len) * 7).is_none() {
        // Truncation intended: the value is below 251.
        return (0..len)
            .map(|i| (seed.wrapping_add(u64::from(i) * 7) % 251) as u8)
            .collect();
    }
    let mut r = seed % 251;
    (0..len)
        .map(|_| {
            // Truncation intended: r < 251.
            let b = r as u8;
            r += 7;
            if r >= 251 {
                r -= 251;
            }
            b
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::data_bytes;

    /// The stepped bytes are the formula's, near the wrap too.
    #[test]
    fn data_bytes_match_the_formula() {
        for seed in [
            0,
            1,
            250,
            251,
            12_345,
            u64::MAX - 7 * 300,
            u64::MAX - 5,
            u64::MAX,
        ] {
            for len in [0u16, 1, 40, 300] {
                let want: Vec<u8> = (0..len)
                    .map(|i| (seed.wrapping_add(u64::from(i) * 7) % 251) as u8)
                    .collect();
                assert_eq!(data_bytes(seed, len), want, "seed {seed} len {len}");
            }
        }
    }
}
