//! One candidate against a real ZooKeeper server, narrating what happens.
//!
//! ```text
//! cargo run -p zkelect --example elect -- HOST:PORT PATH ID [SESSION_MS] [USER:PASSWORD]
//! ```
//!
//! With credentials, nodes get creator-only ACLs (world-readable unless
//! `ZKELECT_ACL=creator`).
//!
//! Run two or three in separate terminals, then stop the leader (Ctrl-C: it
//! resigns at once; `kill -9`: its session expires), pause the server
//! (`kill -STOP`), restart it, and watch the others take over. Set
//! `RUST_LOG=zkelect=debug` to see every request.

use std::time::{Duration, Instant};

use zkelect::{Acl, Election, LeadOutcome, ZkClientOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "zkelect=info".into()),
        )
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [hosts, path, id, rest @ ..] = args.as_slice() else {
        eprintln!("usage: elect HOST:PORT PATH ID [SESSION_MS] [USER:PASSWORD]");
        std::process::exit(2);
    };
    let session_ms: u64 = match rest.first() {
        Some(ms) => ms.parse()?,
        None => 4_000,
    };
    let mut options =
        ZkClientOptions::new(hosts.clone()).session_timeout(Duration::from_millis(session_ms));
    let mut acl = Acl::Open;
    if let Some(credentials) = rest.get(1) {
        options = options.digest(credentials.clone());
        // ZKELECT_ACL=creator: nobody else may even read the queue.
        acl = match std::env::var("ZKELECT_ACL").as_deref() {
            Ok("creator") => Acl::CreatorAll,
            _ => Acl::CreatorAllWorldRead,
        };
    }
    let started = Instant::now();
    let builder = Election::connect(options)
        .path(path.clone())
        .id(id.clone())
        .acl(acl);
    // Subscribed before the join: every notice, the first included.
    let mut notices = builder.notices();
    let election = builder.join().await?;
    println!(
        "{:>8.3}s  joined as {}",
        started.elapsed().as_secs_f64(),
        election.node().unwrap_or_default()
    );
    tokio::spawn(async move {
        while let Ok(notice) = notices.recv().await {
            println!("{:>8.3}s  {notice:?}", started.elapsed().as_secs_f64());
        }
    });
    let work = async {
        loop {
            let outcome = election
                .lead(|token| async move {
                    println!(
                        "{:>8.3}s  leading with fencing token {token}",
                        started.elapsed().as_secs_f64()
                    );
                    std::future::pending::<()>().await;
                })
                .await?;
            match outcome {
                LeadOutcome::Finished(()) => return Ok::<(), zkelect::ElectionError>(()),
                LeadOutcome::Suspended => println!(
                    "{:>8.3}s  work stopped: connection in doubt",
                    started.elapsed().as_secs_f64()
                ),
                LeadOutcome::Demoted(reason) => println!(
                    "{:>8.3}s  work stopped: {reason}",
                    started.elapsed().as_secs_f64()
                ),
            }
        }
    };
    tokio::select! {
        result = work => result?,
        _ = tokio::signal::ctrl_c() => println!("{:>8.3}s  closing", started.elapsed().as_secs_f64()),
    }
    election.close().await;
    println!(
        "{:>8.3}s  closed; metrics {:?}",
        started.elapsed().as_secs_f64(),
        election.metrics()
    );
    Ok(())
}
