//! `zkelect status` and `zkelect revoke`: read (or prune) the queue directly.

use std::collections::BTreeMap;

use zkelect::{Transport, TransportEvent};
use zkelect_core::config::{split_payload, validate_path};
use zkelect_core::{Config, Recipe, Reply, Request, Rule, ZkCode};

use crate::args::{RecipeArg, RevokeArgs, StatusArgs};
use crate::connect::connect;
use crate::exit::{Code, Failure, WithCode};
use crate::queue_view::{NodeInfo, QueueView};

fn zk_failure(what: &str, code: ZkCode) -> Failure {
    let exit = match code {
        ZkCode::NoAuth | ZkCode::AuthFailed | ZkCode::InvalidAcl => Code::Auth,
        ZkCode::ConnectionLoss | ZkCode::OperationTimeout | ZkCode::SessionExpired => {
            Code::Unreachable
        }
        _ => Code::Other,
    };
    Failure::new(exit, anyhow::anyhow!("{what}: {code}"))
}

async fn children(zk: &dyn Transport, path: &str, watch: bool) -> Result<Vec<String>, Failure> {
    match zk
        .perform(Request::GetChildren {
            path: path.to_owned(),
            watch,
        })
        .await
    {
        Ok(Reply::Children(c)) => Ok(c),
        Ok(_) => Ok(Vec::new()),
        Err(ZkCode::NoNode) => Ok(Vec::new()),
        Err(code) => Err(zk_failure(&format!("listing {path}"), code)),
    }
}

async fn read_all(zk: &dyn Transport, path: &str, names: &[String]) -> BTreeMap<String, NodeInfo> {
    let mut info = BTreeMap::new();
    for name in names {
        let request = Request::GetData {
            path: format!("{path}/{name}"),
            watch: false,
        };
        // A child that vanished since the listing simply has no info.
        if let Ok(Reply::Data { data, stat }) = zk.perform(request).await {
            info.insert(
                name.clone(),
                NodeInfo {
                    data,
                    owner: stat.ephemeral_owner,
                },
            );
        }
    }
    info
}

/// A view with the moment it was read, for `status --watch --json`.
#[derive(serde::Serialize)]
struct Stamped<'a> {
    time: String,
    #[serde(flatten)]
    view: &'a QueueView,
}

fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// The recipe whose queue `status` shows, from its flags, checked as a
/// candidate's configuration would be (a semaphore has no other library's
/// names, k within bounds).
fn recipe_of(args: &StatusArgs) -> Result<Recipe, Failure> {
    let rule = match (args.recipe, args.leaders, args.permits) {
        (None, leaders, None) => Rule::Election {
            leaders: leaders.unwrap_or(1),
        },
        (Some(RecipeArg::Semaphore), _, Some(permits)) => Rule::Semaphore { permits },
        (Some(RecipeArg::Mutex), _, None) => Rule::Mutex,
        (Some(RecipeArg::ReadWrite), _, None) => Rule::Write,
        (_, _, Some(_)) => {
            return Err(Failure::new(
                Code::Usage,
                anyhow::anyhow!("--permits goes with --recipe semaphore only"),
            ))
        }
        (Some(RecipeArg::Semaphore), _, None) => {
            return Err(Failure::new(
                Code::Usage,
                anyhow::anyhow!("--recipe semaphore needs --permits K"),
            ))
        }
    };
    Config::builder(&args.conn.path, "status")
        .rule(rule)
        .interop(args.interop.scheme())
        .build()
        .code(Code::Config)?;
    Ok(rule.recipe())
}

pub(crate) async fn status(args: StatusArgs) -> Result<(), Failure> {
    validate_path(&args.conn.path).code(Code::Config)?;
    let recipe = recipe_of(&args)?;
    let (zk, mut events) = connect(&args.conn).await?;
    let path = args.conn.path.clone();
    let mut last: Option<QueueView> = None;
    loop {
        let names = children(&*zk, &path, args.watch).await?;
        let info = read_all(&*zk, &path, &names).await;
        let view = QueueView::build(&path, recipe, &names, &info, args.interop.scheme());
        // A watch fires for changes the view does not show (a node's data, a
        // reconnection): print only what changed, once.
        if last.as_ref() != Some(&view) {
            if args.json && args.watch {
                let line = Stamped {
                    time: now(),
                    view: &view,
                };
                println!("{}", serde_json::to_string(&line).code(Code::Other)?);
            } else if args.json {
                println!("{}", serde_json::to_string(&view).code(Code::Other)?);
            } else if last.is_none() {
                print!("{}", view.render());
            } else {
                println!("{}  {}", now(), view.line());
            }
            last = Some(view);
        }
        if !args.watch {
            break;
        }
        // Wait for the queue to change (or the session to come back).
        loop {
            match events.recv().await {
                Some(TransportEvent::Watch(_)) => break,
                Some(TransportEvent::Session(zkelect_core::SessionEvent::Connected { .. })) => {
                    break
                }
                Some(_) => {}
                None => {
                    return Err(Failure::new(
                        Code::Unreachable,
                        anyhow::anyhow!("the connection closed"),
                    ))
                }
            }
        }
    }
    zk.close().await;
    Ok(())
}

pub(crate) async fn revoke(args: RevokeArgs) -> Result<(), Failure> {
    validate_path(&args.conn.path).code(Code::Config)?;
    let (zk, _events) = connect(&args.conn).await?;
    let path = args.conn.path.clone();
    let names = children(&*zk, &path, false).await?;
    let info = read_all(&*zk, &path, &names).await;
    let targets = match pick(&args, &info) {
        Ok(targets) => targets,
        Err(e) => {
            zk.close().await;
            return Err(Failure::new(
                Code::UnknownId,
                e.context(format!("in {path}")),
            ));
        }
    };
    for name in targets {
        match zk
            .perform(Request::Delete {
                path: format!("{path}/{name}"),
                version: None,
            })
            .await
        {
            Ok(_) | Err(ZkCode::NoNode) => eprintln!("revoked {name} (id {})", args.id),
            Err(code) => return Err(zk_failure(&format!("deleting {name}"), code)),
        }
    }
    zk.close().await;
    Ok(())
}

/// The nodes `revoke` deletes: the one node carrying the id, or the one named
/// by `--node`, or all of them with `--all`. Ids are not unique (nothing stops
/// two processes from joining with the same one), so several matches without
/// `--all` or `--node` are refused rather than guessed at.
fn pick(args: &RevokeArgs, info: &BTreeMap<String, NodeInfo>) -> anyhow::Result<Vec<String>> {
    let matching: Vec<(&String, &NodeInfo)> = info
        .iter()
        .filter(|(_, node)| split_payload(&node.data).0 == args.id)
        .collect();
    if let Some(wanted) = &args.node {
        return match matching.iter().find(|(name, _)| *name == wanted) {
            Some((name, _)) => Ok(vec![(*name).clone()]),
            None => Err(anyhow::anyhow!(
                "no candidate with id {:?} has the node {wanted:?}",
                args.id
            )),
        };
    }
    match matching.len() {
        0 => Err(anyhow::anyhow!("no candidate with id {:?}", args.id)),
        1 => Ok(vec![matching[0].0.clone()]),
        _ if args.all => Ok(matching.iter().map(|(name, _)| (*name).clone()).collect()),
        n => {
            let list: Vec<String> = matching
                .iter()
                .map(|(name, node)| format!("{name} (session 0x{:x})", node.owner))
                .collect();
            Err(anyhow::anyhow!(
                "{n} candidates carry the id {:?}: {}; pick one with --node NAME, or revoke all with --all",
                args.id,
                list.join(", ")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::args::{Cli, Cmd};

    fn args(extra: &[&str]) -> Result<StatusArgs, clap::Error> {
        let base = ["zkelect", "status", "--connect", "h:1", "--path", "/l"];
        let cli = Cli::try_parse_from(base.iter().chain(extra))?;
        let Cmd::Status(status) = cli.command else {
            panic!("not status")
        };
        Ok(status)
    }

    fn recipe(extra: &[&str]) -> Result<Recipe, Code> {
        recipe_of(&args(extra).expect("parses")).map_err(|f| f.code)
    }

    #[test]
    fn status_reads_the_recipe_its_flags_name() {
        assert_eq!(recipe(&[]), Ok(Recipe::Election { leaders: 1 }));
        assert_eq!(
            recipe(&["--leaders", "3"]),
            Ok(Recipe::Election { leaders: 3 })
        );
        assert_eq!(recipe(&["--recipe", "mutex"]), Ok(Recipe::Mutex));
        assert_eq!(
            recipe(&["--recipe", "semaphore", "--permits", "2"]),
            Ok(Recipe::Semaphore { permits: 2 })
        );
        assert_eq!(recipe(&["--recipe", "read-write"]), Ok(Recipe::ReadWrite));
        assert_eq!(
            recipe(&["--recipe", "read-write", "--interop", "kazoo"]),
            Ok(Recipe::ReadWrite)
        );
    }

    #[test]
    fn status_refuses_recipe_flags_that_name_no_queue() {
        use clap::error::ErrorKind;
        // clap's own refusals (exit 2).
        let kind = |extra: &[&str]| args(extra).map(|_| ()).map_err(|e| e.kind());
        assert_eq!(
            kind(&["--recipe", "semaphore"]),
            Err(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            kind(&["--recipe", "mutex", "--leaders", "2"]),
            Err(ErrorKind::ArgumentConflict)
        );
        assert_eq!(kind(&["--recipe", "lottery"]), Err(ErrorKind::InvalidValue));
        // Ours: permits without a semaphore is a usage error; what a
        // candidate's configuration refuses is a configuration error.
        assert_eq!(recipe(&["--permits", "2"]), Err(Code::Usage));
        assert_eq!(
            recipe(&["--recipe", "mutex", "--permits", "2"]),
            Err(Code::Usage)
        );
        assert_eq!(
            recipe(&["--recipe", "semaphore", "--permits", "0"]),
            Err(Code::Config)
        );
        assert_eq!(recipe(&["--leaders", "0"]), Err(Code::Config));
        assert_eq!(
            recipe(&[
                "--recipe",
                "semaphore",
                "--permits",
                "2",
                "--interop",
                "curator"
            ]),
            Err(Code::Config),
            "a semaphore has no Curator names"
        );
    }
}
