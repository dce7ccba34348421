//! # zkelect
//!
//! Leader election on Apache ZooKeeper for tokio services. The election logic,
//! and everything one ZooKeeper session shares among its recipes, is the
//! sans-IO state machine of [`zkelect_core`] (its `Session`); this crate runs
//! it: a pump task feeds it replies, watch events, session events and the
//! time, performs its requests through a [`Transport`], and publishes what
//! the application needs — the role, notices, the lease.
//!
//! ```no_run
//! use tokio::signal::unix::{signal, SignalKind};
//! use zkelect::{Election, FencingToken, ZkClientOptions};
//!
//! async fn serve(token: FencingToken) { /* lead; pass `token` to every fenced write */ }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let election = Election::connect(ZkClientOptions::new("127.0.0.1:2181"))
//!         .path("/services/scheduler/leader").id("node-a").join().await?;
//!     let mut sigterm = signal(SignalKind::terminate())?;
//!     let shutdown = async {
//!         tokio::select! { _ = sigterm.recv() => {}, _ = tokio::signal::ctrl_c() => {} }
//!     };
//!     // Runs `serve` whenever elected (dropping it the moment leadership is
//!     // lost or in doubt), until SIGTERM or Ctrl-C; then deletes the node, so
//!     // a successor leads without waiting out the session.
//!     election.lead_forever(shutdown, serve).await?;
//!     Ok(())
//! }
//! ```
//!
//! ## Pieces
//!
//! - [`Election`] and its [`ElectionBuilder`]: the API. [`Election::changes`]
//!   is a `watch` channel of the [`Role`]; [`Election::notices`] a broadcast of
//!   every [`Notice`] from then on ([`ElectionBuilder::notices`], taken
//!   before the start, from the first); [`Election::lead`] runs work only while leading (one
//!   term), [`Election::lead_forever`] whenever leading, until shutdown.
//! - [`Observation`]: who is in a queue, in queue order, and who leads or
//!   holds, without a node of its own ([`Election::observe`],
//!   [`Session::observe`]; the core's `Observer` machine).
//! - [`Transport`]: the seam to a ZooKeeper client, with its [`EventStream`].
//!   [`ZkClientTransport`](zk_client/struct.ZkClientTransport.html)
//!   (feature `zookeeper-client`, the one default feature, with
//!   `zookeeper-client-tls` and `zookeeper-client-sasl`) talks to real
//!   servers through `zookeeper-client`, with TLS, SASL and `multi`, and
//!   makes up for that client's gaps (see [`zk_client`](zk_client/index.html));
//!   [`ZkAsyncTransport`](zk_async/struct.ZkAsyncTransport.html) (feature
//!   `zookeeper-async`) talks to them through `zookeeper-async` (see
//!   [`zk_async`](zk_async/index.html)); [`MemoryTransport`](memory/struct.MemoryTransport.html) (feature
//!   `memory`) runs over the simulator's in-memory ZooKeeper, also under
//!   paused tokio time. What each client gets wrong, why the two transports
//!   differ, and why zookeeper-client is the default (measured), is in
//!   `adapters/CLIENTS.md` in the repository.
//!   [`Election::connect`] takes the settings of either real transport.
//! - Guarded writes: [`Election::guarded`] and [`Election::guarded_set_data`]
//!   write to ZooKeeper only if this candidate still leads, checked by the
//!   server atomically with the write (a `multi`; zookeeper-client and memory
//!   transports).
//! - [`Session`]: one ZooKeeper session, one pump task, many elections
//!   ([`Session::election`]), as Curator and kazoo run every recipe of a
//!   process on one session. [`Election::connect`] and [`Election::builder`]
//!   are the one-election shortcut: a session of its own that closes with it.
//! - Locks on a session: [`Mutex`], [`Semaphore`], [`RwLock`], each
//!   handing out a [`LockGuard`] (see below).
//! - [`Status`]: one snapshot per election (role, node, lease, last
//!   demotion, error, counters), a `watch` from [`Election::status`].
//! - The pump: one task per session that moves bytes, events and the clock
//!   between the transport and the core's `Session` (which owns the
//!   machines and routes replies, watch events and session events to them)
//!   and publishes what it says; it decides nothing itself. A handle's
//!   intent is applied in the handle's own task, so a lock's release sends
//!   its node's delete before it awaits anything. Time is tokio's, so
//!   `#[tokio::test(start_paused = true)]` runs elections in virtual time.
//!
//! ## Locks, semaphores and read-write locks
//!
//! The same queue serves the lock recipes a Curator or kazoo user knows,
//! on one [`Session`] with everything else: [`Session::mutex`] (a fair,
//! reentrant [`Mutex`]), [`Session::semaphore`] ([`Semaphore`]) and
//! [`Session::rw_lock`] ([`RwLock`]). Each `acquire` returns a
//! [`LockGuard`] with the fencing token, the lease, a future that resolves
//! if the hold is lost, and guarded writes; dropping it releases (the
//! node's delete is retried in the background until it succeeds or the
//! session ends), and a cancelled `acquire` leaves no node behind.
//!
//! The examples on these pages connect to
//! [`MemoryServer`](memory/struct.MemoryServer.html) (feature `memory`), the
//! simulator's in-memory ZooKeeper, so that they run as tests; with real
//! servers, `settings` is a [`ZkAsyncOptions`](zk_async/type.ZkAsyncOptions.html) or a
//! [`ZkClientOptions`](zk_client/type.ZkClientOptions.html). A lock, after
//! connecting:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # use std::time::Duration;
//! # let server = zkelect::memory::MemoryServer::new();
//! # let settings = server.settings(Duration::from_secs(4));
//! let session = zkelect::Session::connect(settings).await?;
//! let guard = session.mutex("/svc/locks/nightly-report").acquire().await?;
//! println!("holding, fencing token {}", guard.token()); // pass it to every fenced write
//! drop(guard); // releases
//! # session.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! With a deadline, and stopping the work if the lock is lost:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # use std::time::Duration;
//! # let server = zkelect::memory::MemoryServer::new();
//! # let session = zkelect::Session::connect(server.settings(Duration::from_secs(4))).await?;
//! let lock = session.mutex("/svc/locks/nightly-report");
//! match lock.try_acquire(Duration::from_secs(10)).await? {
//!     None => eprintln!("someone else is on it"),
//!     Some(guard) => tokio::select! {
//!         reason = guard.lost() => eprintln!("lock lost ({reason}): stopped"),
//!         () = async { /* the work; fenced with guard.token() */ } => guard.release().await,
//!     },
//! }
//! # session.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! A semaphore (at most 4 transcoders at once, across every process):
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # use std::time::Duration;
//! # let server = zkelect::memory::MemoryServer::new();
//! # let session = zkelect::Session::connect(server.settings(Duration::from_secs(4))).await?;
//! let transcoders = session.semaphore("/svc/transcoders", 4);
//! let permit = transcoders.acquire().await?;
//! // ... transcode ...
//! drop(permit);
//! # session.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! A job that needs 3 of those slots asks for 3 at once
//! ([`Semaphore::acquire_many`], Curator's `acquire(qty)`): one guard, one
//! node weighing 3, served in arrival order, so later requests for 1 never
//! starve it:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # use std::time::Duration;
//! # let server = zkelect::memory::MemoryServer::new();
//! # let session = zkelect::Session::connect(server.settings(Duration::from_secs(4))).await?;
//! let transcoders = session.semaphore("/svc/transcoders", 4);
//! let three = transcoders.acquire_many(3).await?;
//! // ... a 4K transcode ...
//! three.release().await; // all three back
//! # session.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! Cooperative revocation (Curator's `makeRevocable` / `Revoker`): a
//! [`revocable`](Mutex::revocable) holder hears when someone asks it to let
//! go ([`LockGuard::revocation_requested`]), and decides; anyone asks with
//! [`Session::request_revocation`] (or Curator's `Revoker`, or `zkelect
//! revoke --ask`):
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # use std::time::Duration;
//! # let server = zkelect::memory::MemoryServer::new();
//! # let session = zkelect::Session::connect(server.settings(Duration::from_secs(4))).await?;
//! let guard = session.mutex("/svc/locks/compaction").revocable(true).acquire().await?;
//! # session.request_revocation("/svc/locks/compaction", guard.node()).await?;
//! tokio::select! {
//!     () = guard.revocation_requested() => {
//!         // Asked to let go: finish the current step, then release.
//!         guard.release().await;
//!     }
//!     reason = guard.lost() => eprintln!("lock lost ({reason})"),
//! }
//! # session.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! A read-write lock (readers share, a writer is alone, first come first served):
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # use std::time::Duration;
//! # let server = zkelect::memory::MemoryServer::new();
//! # let session = zkelect::Session::connect(server.settings(Duration::from_secs(4))).await?;
//! let catalog = session.rw_lock("/svc/catalog");
//! {
//!     let _reading = catalog.read().acquire().await?;
//!     // ... read; other readers may too ...
//! }
//! let writing = catalog.write().acquire().await?;
//! // Written only if the write lock is still held, checked by the server.
//! if let Err(e) = writing.guarded_set_data("/svc/catalog-version", b"42".to_vec()).await {
//!     eprintln!("not written: {e}");
//! }
//! # drop(writing);
//! # session.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! A writer that is done writing but goes on reading downgrades in place
//! ([`LockGuard::downgrade`], Curator's "take the read lock, then release the
//! write lock"): readers queued behind it get in, a writer queued behind
//! them cannot get in between:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # use std::time::Duration;
//! # let server = zkelect::memory::MemoryServer::new();
//! # let session = zkelect::Session::connect(server.settings(Duration::from_secs(4))).await?;
//! let catalog = session.rw_lock("/svc/catalog");
//! let held = catalog.write().acquire().await?;
//! // ... rewrite the catalog ...
//! held.downgrade().await?;
//! // ... keep reading it, beside other readers ...
//! held.release().await;
//! # session.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! Several locks, all or none ([`Session::multi_lock`], Curator's
//! `InterProcessMultiLock`): taken in one global order (sorted paths), so
//! two multi-locks over the same paths never deadlock, whatever order each
//! names them in:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # use std::time::Duration;
//! # let server = zkelect::memory::MemoryServer::new();
//! # let session = zkelect::Session::connect(server.settings(Duration::from_secs(4))).await?;
//! let both = session.multi_lock(["/svc/accounts/17", "/svc/accounts/4"]);
//! let guard = both.acquire().await?;
//! // ... move money between the two accounts, fenced with guard.tokens() ...
//! drop(guard); // releases both
//! # session.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! A mutex that is not reentrant ([`Mutex::reentrant`], Curator's
//! `InterProcessSemaphoreMutex`), with the holder's address in its node for
//! observers and `zkelect status` ([`Mutex::data`]; every lock handle has
//! it, and [`Mutex::acl`]):
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # use std::time::Duration;
//! # let server = zkelect::memory::MemoryServer::new();
//! # let session = zkelect::Session::connect(server.settings(Duration::from_secs(4))).await?;
//! let lock = session
//!     .mutex("/svc/locks/rebuild")
//!     .reentrant(false)
//!     .data(b"10.0.0.7:8080".to_vec());
//! let guard = lock.acquire().await?;
//! assert!(matches!(lock.acquire().await, Err(zkelect::LockError::InUse)));
//! # drop(guard);
//! # session.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! The session's connection state for everything on it ([`Session::states`],
//! Curator's `ConnectionStateListener`), and an election's participants and
//! leader from its own handle ([`Election::participants`],
//! [`Election::leader`], Curator's `LeaderLatch.getParticipants()` /
//! `getLeader()`):
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # use std::time::Duration;
//! # let server = zkelect::memory::MemoryServer::new();
//! # let session = zkelect::Session::connect(server.settings(Duration::from_secs(4))).await?;
//! use zkelect::ConnectionState;
//! let mut states = session.states();
//! tokio::spawn(async move {
//!     while states.changed().await.is_ok() {
//!         if *states.borrow_and_update() == ConnectionState::Suspended {
//!             eprintln!("in doubt: stop serving cached reads");
//!         }
//!     }
//! });
//! let election = session.election("/svc/leader").id("node-a").join().await?;
//! election.wait_leader().await?;
//! let leader = election.leader().await?;
//! assert_eq!(leader.as_ref().and_then(|p| p.id()), Some("node-a"));
//! println!("{} candidates", election.participants().await?.len());
//! # session.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! ## Driving a session by hand
//!
//! Everything this crate's pump does is move what the core's
//! [`Session`](zkelect_core::Session) decides, so a runtime of your own —
//! a blocking loop on a thread, smol, an embedded executor — can embed the
//! whole session without tokio: build a `zkelect_core::Session`, add
//! [`Machine`](zkelect_core::Machine)s (an election's candidate, a lock's,
//! an observer) and run its loop, as the crate docs of `zkelect-core` walk
//! through ("Driving a session by hand") and `sim/examples/by_hand.rs` runs
//! on one std thread over the simulator's ZooKeeper model. What this crate
//! adds on top is only plumbing: the loop below, a clock, the transports,
//! and the handles' channels.
//!
//! ```
//! use zkelect::core::{Input, Session, Timestamp};
//!
//! /// One turn of a driver: `input` (or the deadline) at `now`.
//! fn turn(session: &mut Session, now: Timestamp, input: Option<Input>) {
//!     match input {
//!         Some(input) => session.handle(now, input),
//!         None => session.handle_timeout(now),
//!     }
//!     // Publish first: a demotion reaches the application before the
//!     // requests that follow it go out.
//!     while let Some(event) = session.poll_event() {
//!         println!("{event:?}");
//!     }
//!     while let Some(command) = session.poll_command() {
//!         // Send it; feed its answer back as `Input::Reply { op: command.op, .. }`.
//!         let _ = command;
//!     }
//!     // Sleep until `session.poll_timeout()` or the next input.
//! }
//! # turn(&mut Session::new(zkelect::core::SessionConfig::new(1)), Timestamp::ZERO, None);
//! ```
//!
//! ## Features
//!
//! Only what the README's quick start needs is on by default; the rest is
//! opt-in (`zkelect = { version = "0.1", features = ["testkit"] }`). Each
//! item that needs a feature says which on its page.
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `zookeeper-client` | on | [`zk_client`](zk_client/index.html): [`ZkClientTransport`](zk_client/struct.ZkClientTransport.html) and [`ZkClientOptions`](zk_client/type.ZkClientOptions.html), real servers through `zookeeper-client`, with guarded writes (`multi`) |
//! | `zookeeper-async` | | [`zk_async`](zk_async/index.html): [`ZkAsyncTransport`](zk_async/struct.ZkAsyncTransport.html) and [`ZkAsyncOptions`](zk_async/type.ZkAsyncOptions.html), real servers through `zookeeper-async` |
//! | `zookeeper-client-tls` | | TLS for the zookeeper-client transport (rustls): [`TlsSettings`](zk_client/struct.TlsSettings.html) |
//! | `zookeeper-client-sasl` | | SASL DIGEST-MD5 for the zookeeper-client transport |
//! | `zookeeper-client-gssapi` | | SASL GSSAPI (Kerberos) for the zookeeper-client transport; building it needs the system's GSSAPI headers and libclang (Debian: `libkrb5-dev`, `libclang-dev`; see `adapters/CLIENTS.md`) |
//! | `memory` | | [`memory`](memory/index.html): [`MemoryServer`](memory/struct.MemoryServer.html), the simulator's in-memory ZooKeeper, and its transport, also under paused tokio time |
//! | `testkit` | | [`testkit`](testkit/index.html): faults on the memory transport, seeded chaos, history and fencing checkers (implies `memory`) |
//!
//! These pages, with every feature and each gated item marked with its
//! feature as on docs.rs:
//!
//! ```text
//! RUSTC_BOOTSTRAP=1 RUSTDOCFLAGS="--cfg docsrs" cargo doc -p zkelect --all-features --no-deps --open
//! ```
//!
//! (The marks come from rustdoc's `doc_cfg`, not yet stable, hence
//! `RUSTC_BOOTSTRAP`; docs.rs builds with nightly. Without both variables,
//! `cargo doc -p zkelect --all-features` shows the same items unmarked.)
//!
//! ## Testing your own service
//!
//! The [`testkit`](testkit/index.html) module (feature `testkit`) is an
//! in-memory ZooKeeper with faults your tests trigger, seeded chaos, a
//! history of every term and a fencing checker, in virtual time. Your
//! service's tests need two dev-dependencies:
//!
//! ```toml
//! [dependencies]
//! zkelect = "0.1"
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "signal"] }
//!
//! [dev-dependencies]
//! zkelect = { version = "0.1", features = ["testkit"] }
//! # `#[tokio::test(start_paused = true)]` (virtual time) needs `test-util`.
//! tokio = { version = "1", features = ["macros", "rt", "test-util"] }
//! ```
//!
//! Without tokio's `test-util`, `#[tokio::test(start_paused = true)]` does
//! not compile, and the error points into the test's body rather than at
//! the missing feature.
//!
//! ### Make your service testable
//!
//! Write what the service does while it leads as a function that takes the
//! [`Election`] (or a [`Session`], for a service that runs several recipes),
//! never the connection settings. `main` builds the election over a real
//! transport; a test builds it over [`TestZk`](testkit/struct.TestZk.html) and
//! calls the same function. A leader service written the other way round,
//! connecting inside, has to be taken apart before it can be tested.
//!
//! The service and its `main` (compiled as a doc test):
//!
#![doc = concat!(
    "```no_run\n",
    include_str!("../doc/service.rs"),
    include_str!("../doc/main.rs"),
    "```\n"
)]
//!
//! Its test, the same `serve` over the test kit (run as a doc test; in your
//! crate it is a `#[tokio::test(start_paused = true)]`):
//!
#![doc = concat!(
    "```\n",
    "# mod ticker {\n",
    "# include!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/doc/service.rs\"));\n",
    "# }\n",
    include_str!("../doc/failover.rs"),
    "# #[tokio::main(flavor = \"current_thread\", start_paused = true)]\n",
    "# async fn main() -> Result<(), Box<dyn std::error::Error>> {\n",
    "#     two_nodes_under_chaos_never_write_with_a_stale_token().await\n",
    "# }\n",
    "```\n"
)]
//!
//! The test kit's faults, one at a time or drawn by seeded chaos, are
//! listed on the [`testkit`](testkit/index.html) page;
//! `adapters/examples/scheduler.rs` in the repository runs a scheduler
//! under 1,000 seeds of them.
//!
//! ## Sharing a queue with Curator or kazoo
//!
//! [`ElectionBuilder::interop`] with [`Interop::Curator`] (LeaderLatch) or
//! [`Interop::Kazoo`] (Election, Lock) makes a mixed fleet one election. Our
//! nodes are named in that library's scheme so that it orders them exactly as
//! it orders its own, and its nodes queue with ours:
//!
//! | scheme | our node | the other library's nodes | refused |
//! |---|---|---|---|
//! | `None` (default) | `_c_<nonce>-n_NNNNNNNNNN` | ignored | a prefix naming another library's lock |
//! | `Curator` | `_c_<nonce>-latch-NNNNNNNNNN` | `_c_<uuid>-latch-NNNNNNNNNN` | a custom prefix; a negative sequence |
//! | `Kazoo` | `_c_<nonce>-__lock__NNNNNNNNNN` | `<uuid hex>__lock__NNNNNNNNNN` | a custom prefix; a negative sequence |
//!
//! Both libraries compare sequences as text, which agrees with ZooKeeper's
//! numbers until the parent's counter passes 2^31 − 1; from there a shared
//! queue is refused with
//! [`CandidateError::SequenceWrapped`].
//! The two-watch takeover (a waiter watching the node below its nearest
//! too) is off with interop: a waiter watches its nearest only.
//!
//! ## Persistent look-alikes
//!
//! A child named like a contender but created PERSISTENT (its Stat's
//! `ephemeralOwner` is 0) is held by no process and never goes away by itself.
//! The candidate skips it as soon as the read that would watch it shows its
//! Stat, reports it once ([`Notice::PersistentSkipped`], a `tracing` warning)
//! and never touches it. An event on it, a reconnect or a new session makes it
//! be read again.
//!
//! ## The session timeout is the server's
//!
//! A ZooKeeper server clamps the session timeout a client requests into its
//! `[minSessionTimeout, maxSessionTimeout]` (2 and 20 ticks by default). The
//! core's lease, probe interval and suspension derive from the timeout a
//! transport reports with `Connected`, so every transport reports the
//! *negotiated* timeout, or a bound no greater than it — never the
//! requested one, which can be far longer than the real session:
//!
//! - [`ZkClientTransport`](zk_client/struct.ZkClientTransport.html): the
//!   session's own negotiated timeout, which zookeeper-client reads from the
//!   server's answer.
//! - [`ZkAsyncTransport`](zk_async/struct.ZkAsyncTransport.html): zookeeper-async does not expose it, so before
//!   connecting the transport asks every server of the connect string at
//!   once with a ConnectRequest of its own (a session opened and closed at
//!   once, at most once per process, server and requested timeout) and
//!   reports the smallest answer of the servers it gives the client. Which
//!   servers, when the answers suffice and why the bound holds through
//!   reconnections is the core's start-up machine
//!   ([`core::startup`]): a minority of servers
//!   stopped, frozen or unresolvable costs a start at most 250 ms; it never
//!   guesses. [`ZkAsyncOptions::assume_session_timeout`](struct.SessionOptions.html#method.assume_session_timeout) can only lower that
//!   bound.
//! - A negotiated timeout below [`SESSION_TIMEOUT_MIN`](zk_async/constant.SESSION_TIMEOUT_MIN.html) is refused on
//!   zookeeper-async ([`SessionError::SessionTimeoutTooShort`]).
//!
//! `zkelect run` and `zkelect status` go through the same transports, so the
//! lease of a supervised command is the negotiated one too.
//!
//! ## Panics, errors and unwraps
//!
//! Nothing reachable from the network or from user input panics. Each
//! error type is named for what it covers: [`SessionError`] (connecting,
//! credentials), [`ElectionError`] (an election's setup and end),
//! [`LockError`] (acquiring a lock, a permit, a read-write lock side),
//! [`ObserveError`] (an observation), [`GuardedWriteError`] (a write made
//! only while holding), [`RevocationRequestError`] (asking a holder to let
//! go). Everything else (connection loss, expiry,
//! revocation) is a [`Notice`] and a [`Role`] change, handled by the core.
//!
//! Credentials refused after the session started (the server rejects them
//! when they are put back on a new connection, or zookeeper-async cannot put
//! them back within the session timeout) end the session: every recipe on
//! it stops and reports [`SessionError::Auth`] (a recipe started on it later
//! too), [`Session::states`] ends at [`ConnectionState::AuthFailed`],
//! and the session closes itself on the server, so its ephemeral nodes go
//! at once and nobody waits behind a holder that has stopped, as ZooKeeper's
//! own client treats `AUTH_FAILED` as the end.
// Links to items behind a feature (zk_async, zk_client, memory, testkit) are
// relative HTML links, not intra-doc links, here and in the modules: `cargo
// doc` with any set of features, none included, must not warn
// (scripts/doc-features.sh builds it with none), and docs built with the
// features (docs.rs) still lead to the items.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
// docs.rs (and the command in the README) document every feature and mark
// each gated item with the feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod clock;
mod connect;
mod driver;
#[cfg(test)]
mod driver_tests;
mod election;
mod error;
mod facade;
mod forever;
pub mod hop;
mod hub;
mod lock;
#[cfg(feature = "memory")]
pub mod memory;
mod multi_lock;
mod observer;
mod revocation;
mod session;
#[cfg(any(feature = "zookeeper-async", feature = "zookeeper-client"))]
mod shell;
#[cfg(any(feature = "zookeeper-async", feature = "zookeeper-client"))]
mod startup;
mod status;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod transport;
#[cfg(feature = "zookeeper-async")]
pub mod zk_async;
#[cfg(feature = "zookeeper-client")]
pub mod zk_client;

pub use connect::{Connect, Connecting};
pub use election::{Election, ElectionBuilder, LeadOutcome};
pub use error::{
    ConnectFailure, DowngradeError, ElectionError, GuardedWriteError, LockError, ObserveError,
    RevocationRequestError, SessionError, TlsError,
};
pub use lock::{LockGuard, Mutex, RwLock, Semaphore};
pub use multi_lock::{MultiLock, MultiLockGuard};
pub use observer::{Observation, ObserveBuilder};
pub use session::Session;
#[cfg(any(feature = "zookeeper-async", feature = "zookeeper-client"))]
pub use shell::{SessionOptions, CONNECT_TIMEOUT_MAX, RECONNECT_DELAY_MAX, SESSION_TIMEOUT_MAX};
pub use status::{Metrics, Status};
pub use transport::{EventStream, MultiError, MultiOp, MultiOpResult, Transport, TransportEvent};
#[cfg(feature = "zookeeper-async")]
pub use zk_async::{ZkAsyncExtras, ZkAsyncOptions, ZkAsyncTransport, SESSION_TIMEOUT_MIN};
#[cfg(feature = "zookeeper-client-tls")]
pub use zk_client::TlsSettings;
#[cfg(feature = "zookeeper-client")]
pub use zk_client::{ZkClientExtras, ZkClientOptions, ZkClientTransport};
/// The state machine this crate drives, for everything not re-exported here
/// (inlined, so its items read as `zkelect::core::…` without a second crate's docs).
/// Its examples name it `zkelect_core`, as they must to run in that crate;
/// with `zkelect` as your only dependency, write `zkelect::core` instead.
#[doc(inline)]
pub use zkelect_core as core;
pub use zkelect_core::{
    Acl, CandidateError, ConfigError, ConnectionPolicy, ConnectionState, DemotionReason,
    FencingToken, Interop, Notice, Participant, Reply, Request, Role, SessionEvent, SessionId,
    Stat, Takeover, WatchEvent, WatchKind, WatchStrategy, WrongReply, ZkCode,
};

/// The README's Rust blocks (its quick start), compiled as doc tests so the
/// README cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
