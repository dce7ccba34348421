//! With the `serde` feature, every type that derives `Serialize` and
//! `Deserialize` comes back equal from JSON, in every variant. A derive
//! added without a case here fails `every_serde_type_is_covered`.
//!
//! `cargo test -p zkelect-core --features serde --test serde_roundtrip`; the
//! workspace's test run (scripts/test.sh) has `serde` on and runs it too.
#![cfg(feature = "serde")]

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use zkelect_core::name::{NodeName, Origin};
use zkelect_core::{
    Access, Acl, AclEntry, AclScheme, CandidateError, Command, ConnectionPolicy, ConnectionState,
    CreateMode, DemotionReason, Exit, FencingToken, GroupId, GroupNotice, Identity, Input, Interop,
    MachineId, NamespaceFault, Notice, ObserverConfig, ObserverStats, OpId, Participant, Perms,
    Recipe, Reply, Request, RevocationError, Role, Rule, SessionEvent, SessionId, Stat, Takeover,
    Timestamp, Traffic, Verb, WatchEvent, WatchKind, WatchStrategy, WrongReply, ZkCode,
};

/// Round-trips every value through JSON and returns the type's short name.
fn round_trip<T>(values: impl IntoIterator<Item = T>) -> &'static str
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let mut count = 0;
    for value in values {
        let json = serde_json::to_string(&value).expect("serializes");
        let back: T = serde_json::from_str(&json).expect("deserializes");
        assert_eq!(back, value, "through {json}");
        count += 1;
    }
    assert!(count > 0, "no value of {}", std::any::type_name::<T>());
    std::any::type_name::<T>()
        .rsplit("::")
        .next()
        .unwrap_or_default()
}

fn stat() -> Stat {
    Stat {
        czxid: 0x1_0000_0001,
        mzxid: 0x1_0000_0002,
        pzxid: -1,
        version: 1,
        cversion: 7,
        ephemeral_owner: 0x7fff_0000_0000_0001,
        data_length: 3,
        num_children: 0,
    }
}

fn name() -> NodeName {
    NodeName {
        name: "_c_0123abcd-n_0000000042".into(),
        seq: 42,
        origin: Origin::Ours {
            nonce: Some("0123abcd".into()),
        },
        access: Access::Exclusive,
        weight: 3,
    }
}

fn participant() -> Participant {
    Participant {
        identity: Identity::Known {
            id: "node-a".into(),
            data: b"10.0.0.7:8080".to_vec(),
        },
        weight: 2,
        node: "_c_0123abcd-n_0000000042".into(),
        token: FencingToken(0x1_0000_0001),
        owner: SessionId(0x0100_0a2b_3c4d_5e6f),
        holds: true,
        access: Access::Shared,
    }
}

/// One entry of each scheme, ids that hold `:` among them.
fn acl_entries() -> Vec<AclEntry> {
    [
        "world:anyone:r",
        "auth::cdrwa",
        "digest:ops:kuoBs6L7Zbk4oY7R9TRqDddMz3o=:cdrw",
        "ip:fd00::/8:rwcd",
        "ip:10.0.0.0/8:a",
        "sasl:zkelect@EXAMPLE.COM:cdrwa",
        "x509:CN=zkelect,O=example:r",
    ]
    .into_iter()
    .map(|text| text.parse().expect("a valid entry"))
    .collect()
}

fn wrong_reply() -> WrongReply {
    WrongReply {
        request: Verb::GetData,
        reply: Verb::GetChildren,
        path: "/svc/lock".into(),
    }
}

fn revocation_errors() -> Vec<RevocationError> {
    vec![
        RevocationError::Gone {
            path: "/svc/lock/n".into(),
        },
        RevocationError::Refused {
            path: "/svc/lock/n".into(),
            code: ZkCode::NoAuth,
        },
        RevocationError::Closed,
        RevocationError::WrongReply(wrong_reply()),
    ]
}

fn codes() -> Vec<ZkCode> {
    vec![
        ZkCode::ConnectionLoss,
        ZkCode::OperationTimeout,
        ZkCode::SessionExpired,
        ZkCode::SessionMoved,
        ZkCode::NoNode,
        ZkCode::NodeExists,
        ZkCode::NotEmpty,
        ZkCode::BadVersion,
        ZkCode::NoAuth,
        ZkCode::AuthFailed,
        ZkCode::InvalidAcl,
        ZkCode::BadArguments,
        ZkCode::NoChildrenForEphemerals,
        ZkCode::Unimplemented,
        ZkCode::Other(-999),
    ]
}

fn requests() -> Vec<Request> {
    let path = || "/svc/leader".to_owned();
    vec![
        Request::Create {
            path: path(),
            data: b"node-a".to_vec(),
            mode: CreateMode::EphemeralSequential,
            acl: Acl::CreatorAllWorldRead,
        },
        Request::GetChildren {
            path: path(),
            watch: true,
        },
        Request::GetData {
            path: path(),
            watch: false,
        },
        Request::Exists {
            path: path(),
            watch: true,
        },
        Request::Delete {
            path: path(),
            version: None,
        },
        Request::SetData {
            path: path(),
            data: vec![0, 255],
            version: Some(0),
        },
        Request::Sync { path: path() },
    ]
}

fn replies() -> Vec<Reply> {
    vec![
        Reply::Created {
            path: "/svc/leader/n_0000000001".into(),
            stat: stat(),
        },
        Reply::Children(vec!["a".into(), "b".into()]),
        Reply::Data {
            data: vec![1, 2, 3],
            stat: stat(),
        },
        Reply::Exists(None),
        Reply::Exists(Some(stat())),
        Reply::Deleted,
        Reply::Set(stat()),
        Reply::Synced,
    ]
}

fn session_events() -> Vec<SessionEvent> {
    vec![
        SessionEvent::Connected {
            session_id: Some(SessionId(0x1234)),
            timeout: Duration::from_millis(4_000),
        },
        SessionEvent::Connected {
            session_id: None,
            timeout: Duration::from_nanos(1),
        },
        SessionEvent::Disconnected,
        SessionEvent::Expired,
        SessionEvent::AuthFailed,
        SessionEvent::Closed,
    ]
}

fn watch_kinds() -> Vec<WatchKind> {
    vec![
        WatchKind::NodeCreated,
        WatchKind::NodeDeleted,
        WatchKind::NodeDataChanged,
        WatchKind::NodeChildrenChanged,
    ]
}

fn demotions() -> Vec<DemotionReason> {
    vec![
        DemotionReason::Resigned,
        DemotionReason::Closed,
        DemotionReason::Revoked,
        DemotionReason::Expired,
        DemotionReason::Lost,
        DemotionReason::Failed,
        DemotionReason::Displaced,
    ]
}

fn candidate_errors() -> Vec<CandidateError> {
    vec![
        CandidateError::Refused {
            verb: "create".into(),
            path: "/svc".into(),
            code: ZkCode::NoAuth,
        },
        CandidateError::Namespace {
            path: "/".into(),
            fault: NamespaceFault::Ephemeral,
        },
        CandidateError::AuthFailed,
        CandidateError::SequenceWrapped {
            node: "latch-".into(),
        },
        CandidateError::WrongReply(wrong_reply()),
    ]
}

/// Every type round-tripped, by short name.
fn covered() -> BTreeSet<&'static str> {
    let token = FencingToken(i64::MAX);
    [
        round_trip([Access::Shared, Access::Exclusive]),
        round_trip([
            Acl::Open,
            Acl::CreatorAll,
            Acl::CreatorAllWorldRead,
            Acl::Custom(acl_entries()),
        ]),
        round_trip(acl_entries()),
        round_trip([
            AclScheme::World,
            AclScheme::Auth,
            AclScheme::Digest,
            AclScheme::Ip,
            AclScheme::Sasl,
            AclScheme::X509,
        ]),
        round_trip([Perms::NONE, Perms::READ | Perms::CREATE, Perms::ALL]),
        round_trip([
            ConnectionState::Connecting,
            ConnectionState::Connected,
            ConnectionState::Suspended,
            ConnectionState::Lost,
            ConnectionState::Reconnected,
            ConnectionState::Expired,
            ConnectionState::Closed,
            ConnectionState::AuthFailed,
        ]),
        round_trip([GroupId(0), GroupId(u64::MAX)]),
        round_trip(
            [
                GroupNotice::Held {
                    tokens: vec![("/a".into(), token), ("/b".into(), FencingToken(9))],
                },
                GroupNotice::GaveUp,
                GroupNotice::Failed { path: "/b".into() },
                GroupNotice::Released,
            ]
            .into_iter()
            .chain(demotions().into_iter().map(|reason| GroupNotice::Lost {
                path: "/a".into(),
                reason,
            })),
        ),
        round_trip(revocation_errors()),
        round_trip(candidate_errors()),
        round_trip(
            requests()
                .into_iter()
                .enumerate()
                .map(|(i, request)| Command {
                    op: OpId(i as u64),
                    request,
                }),
        ),
        round_trip([ConnectionPolicy::Standard, ConnectionPolicy::SessionAware]),
        round_trip([
            CreateMode::Persistent,
            CreateMode::Ephemeral,
            CreateMode::PersistentSequential,
            CreateMode::EphemeralSequential,
            CreateMode::Container,
        ]),
        round_trip(demotions()),
        round_trip([Exit::Closed, Exit::Failed, Exit::Abandoned]),
        round_trip([FencingToken(-1), token]),
        round_trip(
            [
                Input::Reply {
                    op: OpId(1),
                    result: Err(ZkCode::NoNode),
                },
                Input::Watch(WatchEvent {
                    kind: WatchKind::NodeDeleted,
                    path: "/svc/leader/n_0000000001".into(),
                }),
            ]
            .into_iter()
            .chain(replies().into_iter().map(|r| Input::Reply {
                op: OpId(2),
                result: Ok(r),
            }))
            .chain(session_events().into_iter().map(Input::Session)),
        ),
        round_trip([Interop::None, Interop::Curator, Interop::Kazoo]),
        round_trip([MachineId(0), MachineId(u64::MAX)]),
        round_trip([NamespaceFault::RootMissing, NamespaceFault::Ephemeral]),
        round_trip([
            name(),
            NodeName {
                origin: Origin::Kazoo,
                ..name()
            },
        ]),
        round_trip(
            [
                Notice::Joined { node: "n".into() },
                Notice::Elected { token },
                Notice::Suspended,
                Notice::Resumed,
                Notice::LeaderChanged { leader: None },
                Notice::LeaderChanged {
                    leader: Some("a".into()),
                },
                Notice::PersistentSkipped { node: "p".into() },
                Notice::TokenRegressed {
                    before: token,
                    now: FencingToken(3),
                },
                Notice::Participants(vec![participant()]),
                Notice::RevocationRequested,
                Notice::Downgraded,
                Notice::DowngradeRefused {
                    code: ZkCode::BadVersion,
                },
                Notice::RevocationDelivered {
                    path: "/svc/lock/n".into(),
                },
            ]
            .into_iter()
            .chain(
                demotions()
                    .into_iter()
                    .map(|reason| Notice::Demoted { reason }),
            )
            .chain(candidate_errors().into_iter().map(Notice::Error))
            .chain(
                revocation_errors()
                    .into_iter()
                    .map(Notice::RevocationFailed),
            ),
        ),
        round_trip([
            ObserverConfig::new("/svc/leader", Recipe::Mutex),
            ObserverConfig::new("/svc/leader", Recipe::Election { leaders: 2 })
                .with_interop(Interop::Curator)
                .with_prefix("latch-"),
        ]),
        round_trip([ObserverStats {
            listings: 1,
            reads: 2,
            stale_replies: 3,
            lists: 4,
            exists_watches: 5,
        }]),
        round_trip([OpId(0), OpId(u64::MAX)]),
        round_trip([
            Origin::Ours { nonce: None },
            Origin::Ours {
                nonce: Some("n".into()),
            },
            Origin::Curator,
            Origin::Kazoo,
        ]),
        round_trip([
            participant(),
            Participant {
                identity: Identity::RevocationRequest,
                ..participant()
            },
        ]),
        round_trip([participant().identity, Identity::RevocationRequest]),
        round_trip([
            Recipe::Election { leaders: 3 },
            Recipe::Mutex,
            Recipe::Semaphore { permits: 4 },
            Recipe::ReadWrite,
        ]),
        round_trip(replies()),
        round_trip(requests()),
        round_trip([
            Role::Idle,
            Role::Follower,
            Role::Leader(token),
            Role::Suspended(token),
            Role::Observer,
            Role::Closed,
            Role::Failed,
        ]),
        round_trip([
            Rule::Election { leaders: 1 },
            Rule::Mutex,
            Rule::Semaphore { permits: 2 },
            Rule::Read,
            Rule::Write,
        ]),
        round_trip(session_events()),
        round_trip([SessionId(0), SessionId(-1)]),
        round_trip([stat(), Stat::default()]),
        round_trip([Timestamp::ZERO, Timestamp::from_millis(u64::MAX)]),
        round_trip([Traffic {
            requests: 10,
            errors: 2,
            timeouts: 1,
        }]),
        round_trip([
            Verb::Create,
            Verb::GetChildren,
            Verb::GetData,
            Verb::Exists,
            Verb::Delete,
            Verb::SetData,
            Verb::Sync,
        ]),
        round_trip(watch_kinds().into_iter().map(|kind| WatchEvent {
            kind,
            path: "/svc".into(),
        })),
        round_trip(watch_kinds()),
        round_trip([Takeover::OnNotification, Takeover::Relist]),
        round_trip([WatchStrategy::Predecessor, WatchStrategy::Parent]),
        round_trip(codes()),
        round_trip([wrong_reply()]),
    ]
    .into_iter()
    .collect()
}

#[test]
fn every_type_comes_back_equal_from_json() {
    assert!(covered().len() >= 35, "{:?}", covered());
}

/// A type that derives serde under the `serde` feature, as its source has
/// it: its name, and for an enum the names of its variants.
struct Derived {
    name: String,
    variants: Vec<String>,
}

/// Every `cfg_attr(feature = "serde", derive(...Deserialize...))` in the
/// crate's sources (on one line or spread over several), with the type it
/// is on.
fn derived_in_sources() -> Vec<Derived> {
    fn walk(dir: &std::path::Path, out: &mut Vec<Derived>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("core/src is readable")
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a source file");
            scan(&text.lines().collect::<Vec<_>>(), out);
        }
    }
    fn scan(lines: &[&str], out: &mut Vec<Derived>) {
        for (at, line) in lines.iter().enumerate() {
            let attribute = lines[at..lines.len().min(at + 4)].join(" ");
            if !line.trim_start().starts_with("#[cfg_attr(")
                || !attribute.contains("feature = \"serde\"")
                || !attribute.contains("serde::Deserialize")
            {
                continue;
            }
            let Some((item, header)) = lines[at..].iter().enumerate().find(|(_, l)| {
                let l = l.trim_start();
                l.starts_with("pub struct ") || l.starts_with("pub enum ")
            }) else {
                continue;
            };
            let mut words = header.split_whitespace().skip(1);
            let kind = words.next().unwrap_or_default();
            let name: String = words
                .next()
                .unwrap_or_default()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let mut variants = Vec::new();
            if kind == "enum" {
                for body in &lines[at + item + 1..] {
                    if body.starts_with('}') {
                        break;
                    }
                    let Some(rest) = body.strip_prefix("    ") else {
                        continue;
                    };
                    if rest.starts_with(|c: char| c.is_ascii_uppercase()) {
                        variants.push(
                            rest.chars()
                                .take_while(|c| c.is_alphanumeric() || *c == '_')
                                .collect(),
                        );
                    }
                }
            }
            out.push(Derived { name, variants });
        }
    }
    let mut out = Vec::new();
    walk(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut out,
    );
    out
}

#[test]
fn every_serde_type_is_covered() {
    let derived: BTreeSet<String> = derived_in_sources().into_iter().map(|d| d.name).collect();
    let covered: BTreeSet<String> = covered().into_iter().map(str::to_owned).collect();
    assert!(
        derived.len() >= 35,
        "the source scan found only {derived:?}"
    );
    let missing: Vec<_> = derived.difference(&covered).collect();
    assert!(
        missing.is_empty(),
        "serde types without a round trip: {missing:?}"
    );
}

/// Every variant of every serde enum is written out in this file's cases
/// (`Enum::Variant`), so a variant added later cannot go untried.
#[test]
fn every_variant_of_a_serde_enum_has_a_case() {
    let cases = include_str!("serde_roundtrip.rs");
    let derived = derived_in_sources();
    let variants: Vec<String> = derived
        .iter()
        .flat_map(|d| d.variants.iter().map(move |v| format!("{}::{v}", d.name)))
        .collect();
    assert!(variants.len() >= 100, "the scan found only {variants:?}");
    let missing: Vec<_> = variants
        .iter()
        .filter(|v| !cases.contains(v.as_str()))
        .collect();
    assert!(missing.is_empty(), "variants without a case: {missing:?}");
}

/// What the constructors refuse, serde refuses too: an ACL entry the
/// server would refuse, permission bits ZooKeeper does not define.
#[test]
fn serde_refuses_what_the_constructors_refuse() {
    for text in [
        "\"world:someone:r\"",
        "\"world:anyone:\"",
        "\"ip:10.0.0.0/33:r\"",
        "\"digest:ops:password:r\"",
        "\"anyone\"",
    ] {
        assert!(
            serde_json::from_str::<AclEntry>(text).is_err(),
            "{text} was accepted"
        );
    }
    assert!(serde_json::from_str::<Perms>("32").is_err());
    assert!(serde_json::from_str::<Perms>("255").is_err());
    assert_eq!(serde_json::from_str::<Perms>("31").ok(), Some(Perms::ALL));
    assert_eq!(
        serde_json::to_string(&(Perms::READ | Perms::WRITE))
            .ok()
            .as_deref(),
        Some("3")
    );
}
