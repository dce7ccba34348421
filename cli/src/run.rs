//! `zkelect run`: the command runs only while this process leads.

use std::time::Duration;

use tokio::signal::unix::{signal, SignalKind};
use tracing::info;
use zkelect::Election;
use zkelect_core::{Config, ConnectionPolicy, Role};

use crate::args::{PolicyArg, RunArgs};
use crate::connect::{acl_for, connect, failure};
use crate::exit::{Code, Failure, WithCode};
use crate::lease;
use crate::supervise::{supervise, ChildSpec, Ended};

pub(crate) async fn run(args: RunArgs) -> Result<std::process::ExitCode, Failure> {
    // Refuse bad input before touching the network.
    Config::builder(&args.conn.path, &args.id)
        .build()
        .code(Code::Config)?;
    let Some((program, rest)) = args.command.split_first() else {
        return Err(Failure::new(
            Code::Usage,
            anyhow::anyhow!("no command after --"),
        ));
    };
    let (transport, events) = connect(&args.conn).await?;
    let policy = match args.policy {
        PolicyArg::Standard => ConnectionPolicy::Standard,
        PolicyArg::SessionAware => ConnectionPolicy::SessionAware,
    };
    let mut builder = Election::builder(transport, events)
        .path(&args.conn.path)
        .id(&args.id)
        .policy(policy)
        .interop(args.interop.scheme())
        .acl(acl_for(&args.conn));
    if let Some(data) = &args.data {
        builder = builder.data(data.clone().into_bytes());
    }
    let election = builder.join().await.map_err(failure)?;
    info!(node = ?election.node(), "joined the election");
    let spec = ChildSpec {
        program: program.clone(),
        args: rest.to_vec(),
        env: Vec::new(),
        grace: Duration::from_millis(args.grace_ms),
        watchdog: std::env::current_exe().ok(),
    };
    let mut term = signal(SignalKind::terminate()).code(Code::Other)?;
    let mut int = signal(SignalKind::interrupt()).code(Code::Other)?;
    let shutdown = async move {
        tokio::select! {
            _ = term.recv() => info!("SIGTERM: shutting down"),
            _ = int.recv() => info!("SIGINT: shutting down"),
        }
    };
    let ended = supervise(&spec, election.changes(), election.lease(), shutdown)
        .await
        .code(Code::Spawn)?;
    let outcome = match ended {
        Ended::Shutdown => Ok(std::process::ExitCode::SUCCESS),
        Ended::ChildExited(status) => Ok(lease::exit_code_of(status)),
        Ended::ElectionOver(Role::Failed) => {
            let e = election.wait_leader().await.err();
            Err(match e {
                Some(e) => failure(e),
                None => Failure::new(Code::Election, anyhow::anyhow!("the election failed")),
            })
        }
        Ended::ElectionOver(_) => Ok(std::process::ExitCode::SUCCESS),
    };
    election.close().await;
    info!("closed: node deleted, session closed");
    outcome
}
