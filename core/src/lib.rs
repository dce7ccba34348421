//! # zkelect-core
//!
//! Leader election on Apache ZooKeeper, and the family of queue recipes built
//! the same way (mutex, semaphore, read-write lock: see [`Rule`]), as a
//! **sans-IO, deterministic state machine**. A [`Candidate`] performs no I/O, reads no clock, draws no random
//! numbers and spawns nothing: it takes inputs (replies, watch events, session
//! events, the time) and produces outputs (commands to perform, notices for the
//! application, the next time it wants to be woken). The same inputs always give
//! the same outputs, so one machine runs unchanged under the async driver in the
//! `zkelect` crate, inside the deterministic simulator of `zkelect-sim`, and under
//! a fuzzer. A [`Session`] is the same kind of machine for one ZooKeeper session
//! and every candidate and observer on it (see "Driving a session by hand").
//!
//! ## The run loop
//!
//! 1. Feed one input: [`Candidate::handle`] (or [`Candidate::handle_timeout`], or an
//!    intent such as [`Candidate::join`]), with `now` first.
//! 2. Drain [`Candidate::poll_notice`] and act on each (a `Demoted` means stop leading *now*).
//! 3. Drain [`Candidate::poll_command`] and perform each request; answer each
//!    exactly once with [`Input::Reply`] carrying its [`OpId`].
//! 4. Sleep until [`Candidate::poll_timeout`] or the next input, whichever is first.
//!
//! ## A whole election by hand
//!
//! Two candidates; `a` leads, `b` watches `a`, `a` resigns, `b` takes over on the
//! notification alone.
//!
//! ```
//! use std::time::Duration;
//! use zkelect_core::*;
//!
//! let t = Timestamp::from_millis(0);
//! let connected = Input::Session(SessionEvent::Connected {
//!     session_id: Some(SessionId(1)),
//!     timeout: Duration::from_secs(10),
//! });
//! let stat = |czxid| Stat { czxid, ephemeral_owner: 1, ..Stat::default() };
//! // Takes the first pending command of this kind (create, getChildren, getData, …).
//! fn next(c: &mut Candidate, verb: Verb) -> Command {
//!     let all: Vec<Command> = std::iter::from_fn(|| c.poll_command()).collect();
//!     all.into_iter().find(|cmd| cmd.request.kind() == verb).unwrap()
//! }
//!
//! let mut a = Candidate::new(Config::builder("/svc/leader", "a").build()?);
//! a.join(t);
//! a.handle(t, connected.clone());
//! let create = next(&mut a, Verb::Create);     // create /svc/leader/_c_<nonce>-n_
//! let a_node = format!("{}0000000000", create.request.path()); // the server appends the sequence
//! a.handle(t, Input::Reply { op: create.op, result: Ok(Reply::Created {
//!     path: a_node.clone(), stat: stat(100) }) });
//! let a_name = a.node().unwrap().to_owned();   // _c_<nonce>-n_0000000000
//! let list = next(&mut a, Verb::GetChildren);  // getChildren(/svc/leader)
//! a.handle(t, Input::Reply { op: list.op, result: Ok(Reply::Children(vec![a_name.clone()])) });
//! assert_eq!(a.role(), Role::Leader(FencingToken(100)));
//!
//! // b is behind a, so it watches a (and only a).
//! let mut b = Candidate::new(Config::builder("/svc/leader", "b").nonce_seed(2).build()?);
//! b.join(t);
//! b.handle(t, connected);
//! let create = next(&mut b, Verb::Create);
//! b.handle(t, Input::Reply { op: create.op, result: Ok(Reply::Created {
//!     path: format!("{}0000000001", create.request.path()), stat: stat(101) }) });
//! let list = next(&mut b, Verb::GetChildren);
//! b.handle(t, Input::Reply { op: list.op, result: Ok(Reply::Children(vec![
//!     b.node().unwrap().to_owned(), a_name.clone()])) });
//! assert_eq!(b.watching().as_deref(), Some(a_name.as_str()));
//! assert_eq!(b.role(), Role::Follower);
//!
//! // a resigns: it is demoted before its delete is even sent.
//! a.resign(t, false);
//! assert!(std::iter::from_fn(|| a.poll_notice())
//!     .any(|n| n == Notice::Demoted { reason: DemotionReason::Resigned }));
//!
//! // b learns of the deletion and leads at once: a was the only node below it,
//! // and a's name carries a nonce drawn for that one node, so the event cannot
//! // be about another node of the same name.
//! b.handle(t, Input::Watch(WatchEvent { kind: WatchKind::NodeDeleted, path: a_node }));
//! assert_eq!(b.role(), Role::Leader(FencingToken(101)));
//! # Ok::<(), ConfigError>(())
//! ```
//!
//! ## A mutex hand-off by hand
//!
//! The same machine under another [`Rule`]: three contenders for a fair mutex
//! hold it in the order they joined, each watching only the node just below
//! its own. A [`Notice::Elected`] (and [`Role::Leader`]) means "holds it" under
//! every rule; its fencing token is the node's creation zxid.
//!
//! ```
//! use std::time::Duration;
//! use zkelect_core::*;
//!
//! let t = Timestamp::from_millis(0);
//! let connected = Input::Session(SessionEvent::Connected {
//!     session_id: Some(SessionId(1)),
//!     timeout: Duration::from_secs(10),
//! });
//! fn next(c: &mut Candidate, verb: Verb) -> Command {
//!     let all: Vec<Command> = std::iter::from_fn(|| c.poll_command()).collect();
//!     all.into_iter().find(|cmd| cmd.request.kind() == verb).unwrap()
//! }
//! // Joins the mutex at /svc/lock as the `seq`-th node, sees `queue`, returns the
//! // machine and its node's full path.
//! let mut join = |id: &str, seq: i64, queue: &[String]| -> Result<(Candidate, String), ConfigError> {
//!     let config = Config::builder("/svc/lock", id).rule(Rule::Mutex)
//!         .nonce_seed(seq as u64).build()?;
//!     let mut c = Candidate::new(config);
//!     c.join(t);
//!     c.handle(t, connected.clone());
//!     let create = next(&mut c, Verb::Create);   // create /svc/lock/_c_<nonce>-m_
//!     let path = format!("{}{seq:010}", create.request.path());
//!     let stat = Stat { czxid: 100 + seq, ephemeral_owner: 1, ..Stat::default() };
//!     c.handle(t, Input::Reply { op: create.op, result: Ok(Reply::Created { path: path.clone(), stat }) });
//!     let mut children = queue.to_vec();
//!     children.push(c.node().unwrap().to_owned());
//!     let list = next(&mut c, Verb::GetChildren);
//!     c.handle(t, Input::Reply { op: list.op, result: Ok(Reply::Children(children)) });
//!     // A waiter watches its own node first (a child watch), and the nodes
//!     // below once that is answered.
//!     if let Some(own) = c.poll_command() {
//!         assert_eq!(own.request, Request::GetChildren { path: path.clone(), watch: true });
//!         c.handle(t, Input::Reply { op: own.op, result: Ok(Reply::Children(vec![])) });
//!     }
//!     Ok((c, path))
//! };
//! let name = |path: &str| path.rsplit('/').next().unwrap().to_owned();
//!
//! let (mut a, a_path) = join("a", 0, &[])?;
//! assert_eq!(a.role(), Role::Leader(FencingToken(100)));   // a holds the lock
//! let (mut b, b_path) = join("b", 1, &[name(&a_path)])?;
//! let (mut c, _) = join("c", 2, &[name(&a_path), name(&b_path)])?;
//! assert_eq!(b.watching().as_deref(), Some(name(&a_path).as_str())); // b waits for a
//! assert_eq!(c.watching().as_deref(), Some(name(&b_path).as_str())); // c waits for b first
//!
//! // c watches the two nearest nodes below its own: b, and a behind it (a
//! // read of b sets a data watch; on a, the farther, only its deletion
//! // matters, so a child watch; its own node is watched too).
//! let node_at = |czxid| Reply::Data { data: b"x".to_vec(),
//!     stat: Stat { czxid, ephemeral_owner: 2, ..Stat::default() } };
//! let read = next(&mut c, Verb::GetData);                   // c reads b, setting its watch
//! assert_eq!(read.request.path(), b_path);
//! c.handle(t, Input::Reply { op: read.op, result: Ok(node_at(101)) });
//! let read = next(&mut c, Verb::GetChildren);               // then a
//! assert_eq!(read.request.path(), a_path);
//! c.handle(t, Input::Reply { op: read.op, result: Ok(Reply::Children(vec![])) });
//! assert_eq!(c.watched(), [name(&b_path), name(&a_path)]);
//!
//! // a releases: its node is deleted, and b's watch alone hands b the lock.
//! a.resign(t, false);
//! b.handle(t, Input::Watch(WatchEvent { kind: WatchKind::NodeDeleted, path: a_path.clone() }));
//! assert_eq!(b.role(), Role::Leader(FencingToken(101)));
//! // c hears of it too (after b: the server fires a node's data watches
//! // before its child watches): its books now name all that is left below
//! // it (b alone, watched), so it asks nothing.
//! c.handle(t, Input::Watch(WatchEvent { kind: WatchKind::NodeDeleted, path: a_path }));
//! assert_eq!(c.poll_command(), None);
//! assert_eq!(c.role(), Role::Follower);
//!
//! // b releases: c holds on the notification alone, though its listing showed a.
//! b.resign(t, false);
//! c.handle(t, Input::Watch(WatchEvent { kind: WatchKind::NodeDeleted, path: b_path }));
//! assert_eq!(c.role(), Role::Leader(FencingToken(102)));
//! assert_eq!(c.stats().zero_rtt_takeovers, 1);
//! # Ok::<(), ConfigError>(())
//! ```
//!
//! ## Driving a session by hand
//!
//! What users run is a ZooKeeper session carrying many machines: elections,
//! locks, observers. [`Session`] is that session as one more sans-IO
//! machine: it owns the machines and everything they share — one op-id
//! space, the watch table, the connection and its one liveness probe, the
//! request window, the close deadlines, the lock's release — so a runtime
//! of your own (a blocking loop on a thread, smol, an embedded executor)
//! embeds the whole session, not just a candidate. The `zkelect` crate's
//! tokio pump and the simulator drive this same machine; so does
//! `sim/examples/by_hand.rs`, a blocking loop on one std thread over the
//! simulator's ZooKeeper model.
//!
//! The loop is the candidate's: feed one input (`now` first), drain
//! [`Session::poll_event`] (notices before requests), send every
//! [`Session::poll_command`] and answer each under its op id, sleep until
//! [`Session::poll_timeout`] or the next input. Here one lock is taken and
//! released; the transport is a closure that answers as a server holding
//! the lock's one node would.
//!
//! ```
//! use std::time::Duration;
//! use zkelect_core::*;
//!
//! let t = Timestamp::from_millis(0);
//! // The watch table's seed: draw it at random in production.
//! let mut session = Session::new(SessionConfig::new(0x5eed));
//! let config = Config::builder("/svc/lock", "me").rule(Rule::Mutex).build()?;
//! let lock = session.add(t, Machine::lock(Candidate::new(config)));
//! session.join(t, lock)?;
//! session.handle(t, Input::Session(SessionEvent::Connected {
//!     session_id: Some(SessionId(1)),
//!     timeout: Duration::from_secs(10),
//! }));
//!
//! // A server holding the lock's node, once created.
//! let stat = Stat { czxid: 7, ephemeral_owner: 1, ..Stat::default() };
//! let mut node: Option<String> = None;
//! let mut server = |request: &Request| -> Result<Reply, ZkCode> {
//!     let name = |path: &String| path.rsplit('/').next().unwrap_or_default().to_owned();
//!     Ok(match request {
//!         Request::Create { path, .. } => {
//!             let path = format!("{path}0000000000");
//!             node = Some(path.clone());
//!             Reply::Created { path, stat }
//!         }
//!         Request::GetChildren { path, .. } if path == "/svc/lock" => {
//!             Reply::Children(node.iter().map(name).collect())
//!         }
//!         Request::GetChildren { .. } => Reply::Children(Vec::new()),
//!         Request::GetData { .. } => Reply::Data { data: b"me".to_vec(), stat },
//!         Request::SetData { .. } => Reply::Set(Stat { version: 1, ..stat }),
//!         Request::Exists { .. } => Reply::Exists(Some(stat)),
//!         Request::Delete { .. } => { node = None; Reply::Deleted }
//!         Request::Sync { .. } => Reply::Synced,
//!     })
//! };
//!
//! // The loop: events first, then every request, each answered.
//! let mut held = None;
//! loop {
//!     while let Some(event) = session.poll_event() {
//!         if let Event::Notice { notice: Notice::Elected { token }, .. } = event {
//!             held = Some(token); // the application may act under the lock now
//!         }
//!     }
//!     let Some(command) = session.poll_command() else { break };
//!     let result = server(&command.request);
//!     session.handle(t, Input::Reply { op: command.op, result });
//! }
//! assert_eq!(held, Some(FencingToken(7)));
//!
//! // The release: the node's delete is the session's very next request.
//! session.close(t, lock)?;
//! let delete = session.poll_command().expect("the delete");
//! assert_eq!(delete.request.kind(), Verb::Delete);
//! let result = server(&delete.request);
//! session.handle(t, Input::Reply { op: delete.op, result });
//! assert!(session.poll_command().is_none(), "nothing else, ever");
//! assert!(session.machine(lock).is_none(), "it left the session");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Panics, errors and unwraps
//!
//! Nothing here panics on any sequence of inputs; a panic is a bug. Bad
//! configuration is refused by [`ConfigBuilder::build`] with a [`ConfigError`].
//! ZooKeeper errors arrive as data ([`ZkCode`] in a reply); what the application
//! must know leaves as a [`Notice`] (`Demoted { reason }`, `Error(..)`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]
// docs.rs marks the `serde` impls with their feature (`doc_cfg`).
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod acl;
mod candidate;
mod command;
pub mod config;
pub mod connect_string;
mod input;
mod interop;
mod kept;
mod lease;
pub mod multilock;
pub mod name;
mod node;
mod notice;
pub mod observer;
mod ops;
mod outbox;
mod revoker;
mod rule;
mod session;
pub mod setup;
mod standing;
pub mod startup;
mod time;
mod timer;
mod zk;

pub use acl::{Acl, AclEntry, AclError, AclScheme, Perms};
pub use candidate::{Candidate, Stats};
pub use command::{Command, OpId};
pub use config::{
    Config, ConfigBuilder, ConfigError, ConnectionPolicy, Takeover, WatchStrategy, REVOKE_MESSAGE,
};
pub use input::{Input, SessionEvent};
pub use interop::Interop;
pub use kept::NameText;
pub use multilock::{GroupNotice, MultiLock, MultiLockError};
pub use name::Access;
pub use notice::{
    CandidateError, DemotionReason, FencingToken, Identity, NamespaceFault, Notice, Participant,
    RevocationError, Role, WrongReply,
};
pub use observer::{Observer, ObserverConfig, ObserverStats};
pub use revoker::Revoker;
pub use rule::{Recipe, Rule};
#[cfg(feature = "planted")]
pub use session::Planted;
pub use session::{
    ConnectionState, Event, Exit, Gone, GroupGone, GroupId, Machine, MachineId, Sender, Session,
    SessionConfig, Traffic, WatchClass, OPENING, REQUESTS_OUT, STARTING_EVERY,
};
pub use time::Timestamp;
pub use zk::{CreateMode, Reply, Request, SessionId, Stat, Verb, WatchEvent, WatchKind, ZkCode};
