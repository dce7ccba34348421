//! `zkelect status`: the queue as the core's observer reports it, once or
//! at every change; `zkelect revoke`: deletes the nodes carrying an id.

use std::collections::BTreeMap;

use zkelect::{Election, Observation, ObserveError, Transport};
use zkelect_core::config::{split_payload, validate_path, REVOKE_MESSAGE};
use zkelect_core::{
    CandidateError, Config, ObserverConfig, Recipe, Reply, Request, Role, Rule, ZkCode,
};

use crate::args::{RecipeArg, RevokeArgs, StatusArgs};
use crate::connect::{connect, session_code, settings};
use crate::exit::{Code, Failure, WithCode};
use crate::queue_view::QueueView;

/// What `revoke` read of one child: its data and ephemeral owner.
#[derive(Debug, Clone, Default)]
struct NodeInfo {
    data: Vec<u8>,
    owner: i64,
}

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
pub(crate) fn recipe_of(args: &StatusArgs) -> Result<Recipe, Failure> {
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

/// The exit code and message of an observation that could not start or stopped.
fn observe_failure(e: ObserveError) -> Failure {
    let code = match &e {
        ObserveError::Config(_) => Code::Config,
        ObserveError::Session(e) => session_code(e),
        ObserveError::Fatal(
            CandidateError::AuthFailed
            | CandidateError::Refused {
                code: ZkCode::NoAuth | ZkCode::InvalidAcl | ZkCode::AuthFailed,
                ..
            },
        ) => Code::Auth,
        ObserveError::Fatal(_) => Code::Other,
        ObserveError::Timeout(..) | ObserveError::Closed => Code::Unreachable,
        _ => Code::Other,
    };
    Failure::new(code, e)
}

/// Prints one view: the table (or JSON) first, then with `--watch` one
/// timestamped line (or JSON object) per change.
fn print(args: &StatusArgs, view: &QueueView, first: bool) -> Result<(), Failure> {
    if args.json && args.watch {
        let line = Stamped { time: now(), view };
        println!("{}", serde_json::to_string(&line).code(Code::Other)?);
    } else if args.json {
        println!("{}", serde_json::to_string(view).code(Code::Other)?);
    } else if first {
        print!("{}", view.render());
    } else {
        println!("{}  {}", now(), view.line());
    }
    Ok(())
}

/// Prints the observation's list, then with `--watch` each change of it,
/// until the observation stops (its error) or the process is interrupted.
async fn follow(
    args: &StatusArgs,
    config: &ObserverConfig,
    observation: &Observation,
) -> Result<(), Failure> {
    let mut changes = observation.changes();
    let mut state = observation.status();
    let first = QueueView::of(config, &changes.borrow_and_update());
    print(args, &first, true)?;
    if !args.watch {
        return Ok(());
    }
    loop {
        tokio::select! {
            // The sender lives as long as the observation: never an error.
            _ = changes.changed() => {
                let view = QueueView::of(config, &changes.borrow_and_update());
                print(args, &view, false)?;
            }
            changed = state.changed() => {
                let stopped = matches!(state.borrow_and_update().role, Role::Failed | Role::Closed);
                if changed.is_err() || stopped {
                    // Rejected credentials stop it as AuthFailed: exit 5 too.
                    let e = observation.error().map_or(ObserveError::Closed, ObserveError::Fatal);
                    return Err(observe_failure(e));
                }
            }
        }
    }
}

/// Shows the queue through the core's observer: its first report, then,
/// with `--watch`, each report after it — the observer reports a list only
/// when it changed, and follows the path while it is missing or deleted
/// and created again — until interrupted or the observation stops.
pub(crate) async fn status(args: StatusArgs) -> Result<(), Failure> {
    validate_path(&args.conn.path).code(Code::Config)?;
    let recipe = recipe_of(&args)?;
    let scheme = args.interop.scheme();
    let config = ObserverConfig::new(args.conn.path.clone(), recipe).with_interop(scheme);
    let observation = Election::observe(settings(&args.conn)?, args.conn.path.clone())
        .recipe(recipe)
        .interop(scheme)
        .start()
        .await
        .map_err(observe_failure)?;
    let outcome = follow(&args, &config, &observation).await;
    observation.close().await;
    outcome
}

pub(crate) async fn revoke(args: RevokeArgs) -> Result<(), Failure> {
    validate_path(&args.conn.path).code(Code::Config)?;
    let (zk, events) = connect(&args.conn).await?;
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
    if args.ask {
        return ask(zk, events, &args, &path, targets).await;
    }
    for name in targets {
        match zk
            .perform(Request::Delete {
                path: format!("{path}/{name}"),
                version: None,
            })
            .await
        {
            Ok(_) | Err(ZkCode::NoNode) => eprintln!("revoked {name} ({})", whose(&args)),
            Err(code) => return Err(zk_failure(&format!("deleting {name}"), code)),
        }
    }
    zk.close().await;
    Ok(())
}

/// `revoke --ask`: a cooperative revocation request written into each
/// target node by the library's `Session::request_revocation` (Curator's
/// `Revoker.attemptRevoke`); nothing is deleted, the holder decides. A node
/// gone meanwhile is exit 10, as an id not found: nobody was asked.
async fn ask(
    zk: std::sync::Arc<dyn Transport>,
    events: zkelect::EventStream,
    args: &RevokeArgs,
    path: &str,
    targets: Vec<String>,
) -> Result<(), Failure> {
    use zkelect::RevocationRequestError as E;
    let session = zkelect::Session::from_transport(zk, events);
    let mut result = Ok(());
    for name in targets {
        match session.request_revocation(path, &name).await {
            Ok(()) => eprintln!(
                "asked {name} ({}) to let go: the holder decides",
                whose(args)
            ),
            Err(E::Gone { path }) => {
                result = Err(Failure::new(
                    Code::UnknownId,
                    anyhow::anyhow!("{path} is gone (its holder let go): nobody was asked"),
                ));
                break;
            }
            Err(E::Refused { path, code }) => {
                result = Err(zk_failure(&format!("asking {path} to let go"), code));
                break;
            }
            Err(E::Config(e)) => {
                result = Err(Failure::new(Code::Config, anyhow::anyhow!(e)));
                break;
            }
            Err(e) => {
                result = Err(Failure::new(
                    Code::Unreachable,
                    anyhow::anyhow!("asking {name} to let go: {e}"),
                ));
                break;
            }
        }
    }
    session.close().await;
    result
}

/// The nodes `revoke` deletes: the one node carrying the id, or the one named
/// by `--node`, or all of them with `--all`. Ids are not unique (nothing stops
/// two processes from joining with the same one), so several matches without
/// `--all` or `--node` are refused rather than guessed at.
fn pick(args: &RevokeArgs, info: &BTreeMap<String, NodeInfo>) -> anyhow::Result<Vec<String>> {
    let carries = |node: &NodeInfo| match &args.id {
        // A revocation request written over a node's data leaves it no id.
        Some(id) => node.data != REVOKE_MESSAGE && split_payload(&node.data).0 == *id,
        // By name alone (--node): any node a process holds.
        None => node.owner != 0,
    };
    let of_id = args
        .id
        .as_ref()
        .map_or(String::new(), |id| format!(" of id {id:?}"));
    let matching: Vec<(&String, &NodeInfo)> =
        info.iter().filter(|(_, node)| carries(node)).collect();
    let listed = |nodes: &[(&String, &NodeInfo)]| {
        nodes
            .iter()
            .map(|(name, node)| format!("{name} (session 0x{:x})", node.owner))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(wanted) = &args.node {
        let named: Vec<_> = matching
            .iter()
            .copied()
            .filter(|(name, _)| names_node(name, wanted))
            .collect();
        return match named.as_slice() {
            [(name, _)] => Ok(vec![(*name).clone()]),
            [] => Err(anyhow::anyhow!(
                "no node{of_id} is named {wanted:?} or ends with it"
            )),
            several => Err(anyhow::anyhow!(
                "--node {wanted:?} is ambiguous: {} nodes{of_id} end with it: {}; give more of the name",
                several.len(),
                listed(several)
            )),
        };
    }
    // Without --node the parser asked for --id.
    let id = args.id.as_deref().unwrap_or_default();
    match matching.len() {
        0 => Err(anyhow::anyhow!("no node carries the id {id:?}")),
        1 => Ok(vec![matching[0].0.clone()]),
        _ if args.all => Ok(matching.iter().map(|(name, _)| (*name).clone()).collect()),
        n => Err(anyhow::anyhow!(
            "{n} nodes carry the id {id:?}: {}; pick one with --node NAME, or revoke all with --all",
            listed(&matching)
        )),
    }
}

/// Whose node `revoke` reached, for its log line: the id it was given, or
/// none (named by --node alone).
fn whose(args: &RevokeArgs) -> String {
    args.id
        .as_ref()
        .map_or_else(|| "id not given".to_owned(), |id| format!("id {id}"))
}

/// Whether `--node wanted` names the node `name`: its full name, or a
/// suffix of it that starts at a boundary of the name's parts (after `-` or
/// `_`, as in `_c_<nonce>-n_0000000007`), so that `n_0000000007` or
/// `0000000007` names it and `7` does not.
fn names_node(name: &str, wanted: &str) -> bool {
    if wanted.is_empty() {
        return false;
    }
    match name.strip_suffix(wanted) {
        Some("") => true,
        Some(before) => before.ends_with(['-', '_']) && !wanted.starts_with(['-', '_']),
        None => false,
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

    fn revoke_args(extra: &[&str]) -> RevokeArgs {
        let base = ["zkelect", "revoke", "--connect", "h:1", "--path", "/l"];
        let cli = Cli::try_parse_from(base.iter().chain(extra)).expect("parses");
        let Cmd::Revoke(revoke) = cli.command else {
            panic!("not revoke")
        };
        revoke
    }

    fn queue(nodes: &[(&str, &str, i64)]) -> BTreeMap<String, NodeInfo> {
        nodes
            .iter()
            .map(|(name, id, owner)| {
                let info = NodeInfo {
                    data: id.as_bytes().to_vec(),
                    owner: *owner,
                };
                ((*name).to_owned(), info)
            })
            .collect()
    }

    #[test]
    fn revoke_node_takes_a_unique_suffix_and_refuses_an_ambiguous_one() {
        let info = queue(&[
            ("_c_00000000000000aa-n_0000000007", "node-a", 0x10),
            ("_c_00000000000000bb-n_0000000017", "node-a", 0x11),
            ("_c_00000000000000cc-n_0000000027", "node-b", 0x12),
        ]);
        let pick_node = |node: &str| pick(&revoke_args(&["--id", "node-a", "--node", node]), &info);
        for name in [
            "_c_00000000000000aa-n_0000000007",
            "n_0000000007",
            "0000000007",
        ] {
            assert_eq!(
                pick_node(name).expect(name),
                ["_c_00000000000000aa-n_0000000007"],
                "{name}"
            );
        }
        // Not at a boundary of the name's parts: names nothing.
        for name in ["7", "_0000000007", "000007", ""] {
            let e = pick_node(name).unwrap_err().to_string();
            assert!(e.contains("no node of id"), "{name}: {e}");
        }
        // Another id's node is not this id's, even by its full name.
        assert!(pick_node("n_0000000027").is_err());
        // A sequence is unique under its parent, but children that are no
        // recipe's (no sequence) can share a suffix: one that names two
        // nodes is refused, naming both.
        let both = queue(&[("a-lock", "node-a", 0x10), ("b-lock", "node-a", 0x11)]);
        let e = pick(&revoke_args(&["--id", "node-a", "--node", "lock"]), &both)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("ambiguous") && e.contains("a-lock") && e.contains("b-lock"),
            "{e}"
        );
        // Without --node: one node is taken, several refused, --all takes them.
        let e = pick(&revoke_args(&["--id", "node-a"]), &info)
            .unwrap_err()
            .to_string();
        assert!(e.contains("2 nodes carry the id"), "{e}");
        assert_eq!(
            pick(&revoke_args(&["--id", "node-a", "--all"]), &info)
                .expect("all")
                .len(),
            2
        );
        assert_eq!(
            pick(&revoke_args(&["--id", "node-b"]), &info).expect("one"),
            ["_c_00000000000000cc-n_0000000027"]
        );
    }

    #[test]
    fn a_node_whose_id_a_revocation_request_replaced_is_named_by_node_alone() {
        let info = queue(&[
            ("_c_00000000000000aa-n_0000000007", "__REVOKE__", 0x10),
            ("_c_00000000000000bb-n_0000000008", "node-b", 0x11),
            ("look-alike-n_0000000009", "node-c", 0),
        ]);
        // The request carries no id: not even `__REVOKE__`'s.
        for id in ["__REVOKE__", "node-a"] {
            assert!(pick(&revoke_args(&["--id", id]), &info).is_err(), "{id}");
        }
        assert_eq!(
            pick(&revoke_args(&["--node", "n_0000000007"]), &info).expect("named"),
            ["_c_00000000000000aa-n_0000000007"]
        );
        // By name alone, still only a node a process holds.
        let e = pick(&revoke_args(&["--node", "n_0000000009"]), &info)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no node is named"), "{e}");
        // Neither --id nor --node: a usage error.
        let base = ["zkelect", "revoke", "--connect", "h:1", "--path", "/l"];
        assert!(Cli::try_parse_from(base).is_err());
        assert!(Cli::try_parse_from(base.iter().chain(&["--all"])).is_err());
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
