//! `zkelect demo`: a narrated election. By default on the deterministic
//! simulator (no server needed); with `--connect` the same story runs against a
//! real ZooKeeper server through the real driver.

use std::process::ExitCode;
use std::time::Duration;

use zkelect_core::{ConnectionPolicy, Timestamp};
use zkelect_sim::swarm::{Env, Fault, Swarm};
use zkelect_sim::world::World;

use crate::args::DemoArgs;
use crate::exit::{Code, Failure, WithCode};

/// The story, in virtual time: a clean hand-off, a crash, a cut-off leader, a newcomer.
fn story(candidates: usize) -> Vec<(Timestamp, Fault)> {
    let at = Timestamp::from_millis;
    vec![
        (at(2_000), Fault::CloseLeader),
        (at(4_000), Fault::CrashLeader),
        (at(12_000), Fault::PartitionLeader { ms: 7_000 }),
        (at(22_000), Fault::Spawn),
        (at(24_000), Fault::CloseLeader),
    ]
    .into_iter()
    .take(if candidates >= 3 { 5 } else { 3 })
    .collect()
}

/// The checks `demo` makes before running anything: the number of
/// candidates the story can tell (on the simulator, or against a server),
/// and, with `--connect`, the server and the election path.
pub(crate) fn check(args: &DemoArgs) -> Result<(), Failure> {
    if let Some(hosts) = &args.connect {
        upstream(hosts)?;
    }
    match &args.connect {
        None if args.candidates == 0 || args.candidates > 50 => Err(Failure::new(
            Code::Usage,
            anyhow::anyhow!("--candidates must be 1..=50"),
        )),
        None => Ok(()),
        Some(_) if !(2..=20).contains(&args.candidates) => Err(Failure::new(
            Code::Usage,
            anyhow::anyhow!("--candidates must be 2..=20 with --connect"),
        )),
        Some(_) => zkelect_core::config::validate_path(&args.path).code(Code::Config),
    }
}

/// The one server `demo --connect` runs its candidates against, as its
/// proxies dial it: `HOST:PORT`. Its proxies dial one plain address, so a
/// list of servers, a chroot or `tcp+tls://` is a usage error (2), where
/// each would otherwise end, connect timeout later, as an unreachable
/// server (4).
fn upstream(hosts: &str) -> Result<String, Failure> {
    use zkelect_core::connect_string::{ConnectString, Scheme};
    let refuse = |why: &str| {
        Failure::new(
            Code::Usage,
            anyhow::anyhow!("demo --connect takes one HOST:PORT, got {hosts:?}: {why}"),
        )
    };
    let parsed = ConnectString::parse(hosts).map_err(|e| refuse(&e.to_string()))?;
    match (parsed.servers.as_slice(), &parsed.chroot) {
        ([server], None) if server.scheme != Some(Scheme::Tls) => Ok(server.host_port()),
        ([_], None) => Err(refuse("the demo talks plain TCP")),
        ([_], Some(_)) => Err(refuse("no chroot (give the election path with --path)")),
        _ => Err(refuse("one server")),
    }
}

pub(crate) fn simulated(args: &DemoArgs) -> Result<ExitCode, Failure> {
    check(args)?;
    let swarm = Swarm {
        candidates: args.candidates,
        leaders: 1,
        session_timeout: Duration::from_secs(4),
        policy: ConnectionPolicy::Standard,
        chaos: Duration::from_secs(27),
        reorder: false,
        pauses: false,
        plan: story(args.candidates),
        env: Env::default(),
    };
    println!(
        "zkelect demo: {} candidates on an in-memory ZooKeeper (seed {}, session timeout 4s, virtual time)\n",
        args.candidates, args.seed
    );
    let mut world = World::new(args.seed, swarm, None, false);
    world.narrate();
    let violation = world.run();
    let mut leaders = Vec::new();
    let mut suspended = 0;
    for (at, line) in world.story() {
        println!("{:>9.3}s  {line}", at.as_millis() as f64 / 1000.0);
        if line.contains("is elected leader") {
            leaders.push(line.split_whitespace().next().unwrap_or("?").to_owned());
        }
        if line.contains("suspended") {
            suspended += 1;
        }
    }
    let stats = world.stats();
    println!(
        "\nsummary: {} elections ({}), {} suspension(s), {} faults, {} ZooKeeper operations; every checker held: {}",
        leaders.len(),
        leaders.join(" → "),
        suspended,
        stats.faults,
        stats.server_ops,
        if violation.is_none() { "yes" } else { "NO" }
    );
    match violation {
        None => Ok(ExitCode::SUCCESS),
        Some(v) => Err(Failure::new(
            Code::Violation,
            anyhow::anyhow!("{}: {}", v.invariant, v.detail),
        )),
    }
}

mod live {
    //! The story against a real server: each candidate connects through a small
    //! in-process TCP proxy, so the demo can cut the leader off without touching
    //! the server.

    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    /// A proxy that can stop forwarding (no RST, no FIN: a silent network).
    pub(crate) struct Proxy {
        pub(crate) addr: std::net::SocketAddr,
        pub(crate) silent: Arc<AtomicBool>,
    }

    async fn pump(
        mut from: tokio::net::tcp::OwnedReadHalf,
        mut to: tokio::net::tcp::OwnedWriteHalf,
        silent: Arc<AtomicBool>,
    ) {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            while silent.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    // Bytes read just as the link went silent are held, as a stalled network would.
                    while silent.load(Ordering::Relaxed) {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    if to.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            }
        }
    }

    impl Proxy {
        pub(crate) async fn start(upstream: String) -> std::io::Result<Self> {
            let listener = TcpListener::bind("127.0.0.1:0").await?;
            let addr = listener.local_addr()?;
            let silent = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&silent);
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let Ok(server) = TcpStream::connect(&upstream).await else {
                        continue;
                    };
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::spawn(pump(cr, sw, Arc::clone(&flag)));
                    tokio::spawn(pump(sr, cw, Arc::clone(&flag)));
                }
            });
            Ok(Self { addr, silent })
        }
    }
}

pub(crate) async fn real(args: DemoArgs) -> Result<ExitCode, Failure> {
    use std::time::Instant;

    use zkelect::{Election, ZkAsyncOptions, ZkAsyncTransport};
    use zkelect_core::{Notice, Role};

    use crate::connect::failure;

    let Some(hosts) = args.connect.as_deref() else {
        return simulated(&args);
    };
    check(&args)?;
    let hosts = upstream(hosts)?;
    let timeout = Duration::from_secs(4);
    let started = Instant::now();
    let stamp = move || format!("{:>8.3}s", started.elapsed().as_secs_f64());
    println!(
        "zkelect demo: {} candidates on the ZooKeeper server at {hosts}, path {}\n",
        args.candidates, args.path
    );
    let mut candidates = Vec::new();
    for i in 0..args.candidates {
        let proxy = live::Proxy::start(hosts.clone())
            .await
            .code(Code::Unreachable)?;
        let options = ZkAsyncOptions::new(proxy.addr.to_string())
            .session_timeout(timeout)
            .connect_timeout(Duration::from_secs(10));
        let (transport, events) = ZkAsyncTransport::connect(options).await.map_err(failure)?;
        let builder = Election::builder(transport, events)
            .path(&args.path)
            .id(format!("p{i}"));
        // Subscribed before the join, so that no notice is missed.
        let mut notices = builder.notices();
        let election = builder.join().await.map_err(failure)?;
        tokio::spawn(async move {
            while let Ok(notice) = notices.recv().await {
                let line = match notice {
                    Notice::Elected { token } => {
                        format!("p{i} is elected leader (fencing token {token})")
                    }
                    Notice::Demoted { reason } => format!("p{i} stops leading: {reason}"),
                    Notice::Suspended => format!("p{i} lost contact with the server: suspended"),
                    Notice::Resumed => format!("p{i} is back in contact with the server"),
                    Notice::Joined { node } => format!("p{i} joined the queue as {node}"),
                    _ => continue,
                };
                println!("{}  {line}", stamp());
            }
        });
        println!(
            "{}  p{i} joined as {}",
            stamp(),
            election.node().unwrap_or_default()
        );
        candidates.push((election, proxy));
    }
    let leader_of =
        |cands: &Vec<(Election, live::Proxy)>| cands.iter().position(|(e, _)| e.role().is_leader());
    let wait_leader = |cands: &Vec<(Election, live::Proxy)>, not: Option<usize>| {
        let deadline = Instant::now() + timeout * 4;
        let cands: Vec<Election> = cands.iter().map(|(e, _)| e.clone()).collect();
        async move {
            while Instant::now() < deadline {
                if let Some(i) = cands.iter().position(|e| e.role().is_leader()) {
                    if Some(i) != not {
                        return Some(i);
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            None
        }
    };
    let no_leader = || {
        Failure::new(
            Code::Election,
            anyhow::anyhow!("no leader was elected in time"),
        )
    };
    let mut elected = Vec::new();
    let first = wait_leader(&candidates, None).await.ok_or_else(no_leader)?;
    elected.push(first);
    // 1. A clean hand-off.
    println!("{}  p{first} shuts down cleanly", stamp());
    candidates[first].0.close().await;
    let second = wait_leader(&candidates, Some(first))
        .await
        .ok_or_else(no_leader)?;
    elected.push(second);
    // 2. The leader is cut off: it suspends itself, the server expires it, a successor takes over.
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!(
        "{}  p{second} is cut off from the server for {}s",
        stamp(),
        (timeout * 2).as_secs()
    );
    candidates[second]
        .1
        .silent
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let third = wait_leader(&candidates, Some(second))
        .await
        .ok_or_else(no_leader)?;
    elected.push(third);
    tokio::time::sleep(timeout * 2).await;
    println!("{}  p{second}'s network heals", stamp());
    candidates[second]
        .1
        .silent
        .store(false, std::sync::atomic::Ordering::Relaxed);
    tokio::time::sleep(timeout).await;
    // 3. One more hand-off, then everyone leaves.
    if let Some(now) = leader_of(&candidates) {
        println!("{}  p{now} shuts down cleanly", stamp());
        candidates[now].0.close().await;
        if let Some(next) = wait_leader(&candidates, Some(now)).await {
            elected.push(next);
        }
    }
    for (election, _) in &candidates {
        election.close().await;
    }
    let roles: Vec<Role> = candidates.iter().map(|(e, _)| e.role()).collect();
    println!(
        "\nsummary: leaders in turn {}; all {} candidates closed ({:?})",
        elected
            .iter()
            .map(|i| format!("p{i}"))
            .collect::<Vec<_>>()
            .join(" → "),
        roles.len(),
        roles.iter().all(|r| *r == Role::Closed)
    );
    Ok(ExitCode::SUCCESS)
}
