//! The multi-server model (`zkelect_sim::ensemble`) under random traffic:
//! writes and reads from clients on different servers, lagging followers,
//! `sync`, reconnects that move sessions, members cut off from the quorum.
//! Checkers: single system image (no reply older than what the client saw,
//! across reconnects), read-your-writes (FIFO client order), linearizable
//! writes (sequence numbers grow in commit order). The canary that forgets
//! what it has seen when it reconnects, and so trusts a server behind it,
//! must be caught.

use zkelect_core::{Acl, CreateMode, Reply, Request, Timestamp, ZkCode};
use zkelect_sim::ensemble::{Client, Ensemble, Refused};
use zkelect_sim::rng::SimRng;

const SERVERS: usize = 3;

fn create(path: &str, mode: CreateMode) -> Request {
    Request::Create {
        path: path.into(),
        data: vec![],
        mode,
        acl: Acl::Open,
    }
}

/// Reconnects `c` to the first server (from `start`) that takes it, as a
/// client library walks its server list.
fn move_client(zk: &mut Ensemble, c: &mut Client, start: usize) -> Result<(), String> {
    for i in 0..SERVERS {
        match c.reconnect(zk, (start + i) % SERVERS) {
            Ok(()) => return Ok(()),
            Err(Refused::Behind { .. } | Refused::CutOff) => {}
            Err(Refused::NoServer) => return Err("no such server".into()),
        }
    }
    Ok(()) // every server refused: stays disconnected, tries again later
}

/// What went wrong in a step: the transport (the client moves on), or a
/// broken guarantee (the run fails).
enum Fail {
    Transport(ZkCode),
    Broken(String),
}

impl From<ZkCode> for Fail {
    fn from(code: ZkCode) -> Self {
        Fail::Transport(code)
    }
}

/// One seed's run; `Err` names the broken guarantee. `Ok` counts the replies checked.
fn run(seed: u64, canary: bool) -> Result<u64, String> {
    let mut rng = SimRng::new(seed, 0xE5);
    let mut zk = Ensemble::new(SERVERS, Default::default());
    let now = Timestamp::ZERO;
    let mut clients: Vec<Client> = (0..3)
        .map(|i| Client::connect(&mut zk, now, i % SERVERS).expect("a fresh server admits"))
        .collect();
    if canary {
        clients = clients.into_iter().map(Client::trusting).collect();
    }
    clients[0]
        .call(&mut zk, now, &create("/q", CreateMode::Persistent))
        .map_err(|e| format!("setup: {e}"))?;
    let mut mine: Vec<Vec<String>> = vec![Vec::new(); clients.len()];
    let mut last_seq: i64 = -1;
    let mut checks = 0;
    for step in 0..300 {
        let c = rng.range(0, clients.len() as u64 - 1) as usize;
        let s = rng.range(0, SERVERS as u64 - 1) as usize;
        let broken = |what: &str, e: String| Fail::Broken(format!("step {step}: {what}: {e}"));
        let outcome: Result<(), Fail> = match rng.range(0, 11) {
            0..=2 => {
                let request = create("/q/n_", CreateMode::PersistentSequential);
                clients[c]
                    .checked(&mut zk, now, &request)
                    .map_err(Fail::from)
                    .and_then(|(reply, verdict)| {
                        checks += 1;
                        verdict.map_err(|e| broken("single system image", e))?;
                        if let Ok(Reply::Created { path, .. }) = reply {
                            let name = path.trim_start_matches("/q/").to_owned();
                            let seq: i64 = name[2..].parse().unwrap_or(-1);
                            if seq <= last_seq {
                                return Err(broken(
                                    "linearizable writes",
                                    format!("sequence {seq} committed after {last_seq}"),
                                ));
                            }
                            last_seq = seq;
                            mine[c].push(name);
                        }
                        Ok(())
                    })
            }
            3..=5 => {
                let request = Request::GetChildren {
                    path: "/q".into(),
                    watch: false,
                };
                clients[c]
                    .checked(&mut zk, now, &request)
                    .map_err(Fail::from)
                    .and_then(|(reply, verdict)| {
                        checks += 1;
                        verdict.map_err(|e| broken("single system image", e))?;
                        if let Ok(Reply::Children(children)) = reply {
                            if let Some(own) = mine[c].iter().find(|own| !children.contains(own)) {
                                return Err(broken(
                                    "read-your-writes",
                                    format!("p{c} wrote {own}, reads {children:?}"),
                                ));
                            }
                        }
                        Ok(())
                    })
            }
            6 => {
                zk.set_lag(s, rng.chance(0.6));
                Ok(())
            }
            7 => {
                zk.catch_up(s, rng.range(1, 3) as usize);
                Ok(())
            }
            8 => clients[c]
                .sync(&mut zk)
                .map_err(Fail::from)
                .and_then(|verdict| {
                    checks += 1;
                    verdict.map_err(|e| broken("single system image", e))
                }),
            9 => move_client(&mut zk, &mut clients[c], s).map_err(Fail::Broken),
            10 => {
                zk.cut_off(s);
                Ok(())
            }
            _ => {
                zk.rejoin(s);
                Ok(())
            }
        };
        match outcome {
            Ok(()) => {}
            Err(Fail::Transport(ZkCode::ConnectionLoss | ZkCode::SessionMoved)) => {
                move_client(&mut zk, &mut clients[c], s)?;
            }
            Err(Fail::Transport(other)) => return Err(format!("step {step}: {other}")),
            Err(Fail::Broken(e)) => return Err(e),
        }
    }
    Ok(checks)
}

#[test]
fn the_ensemble_keeps_zookeepers_guarantees_over_500_seeds() {
    let mut checked = 0;
    for seed in 0..500 {
        checked += run(seed, false).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
    assert!(checked > 500 * 50, "only {checked} replies checked");
}

/// A client that forgets what it has seen when it reconnects gets into a
/// server behind it and trusts its reads: the single-system-image checker
/// catches it.
#[test]
fn canary_trusting_a_server_behind_it_is_caught_within_20_seeds() {
    let caught = (0..20).find_map(|seed| run(seed, true).err());
    let e = caught.expect("the trusting client was not caught in 20 seeds");
    assert!(
        e.contains("single system image") || e.contains("read-your-writes"),
        "{e}"
    );
}

/// Reads are the connected server's: a lagging follower answers from behind
/// the leader until `sync`; a cut-off member disconnects its clients; a
/// session used from the connection it left gets `SessionMoved`.
#[test]
fn followers_lag_sync_catches_up_cut_off_members_drop_clients_sessions_move() {
    let now = Timestamp::ZERO;
    let mut zk = Ensemble::new(3, Default::default());
    let mut a = Client::connect(&mut zk, now, 0).unwrap();
    let mut b = Client::connect(&mut zk, now, 1).unwrap();
    zk.set_lag(1, true);
    a.call(&mut zk, now, &create("/x", CreateMode::Persistent))
        .unwrap();
    let read = Request::Exists {
        path: "/x".into(),
        watch: false,
    };
    assert_eq!(b.call(&mut zk, now, &read), Ok(Reply::Exists(None)));
    assert!(zk.last_zxid(1) < zk.last_zxid(0));
    b.sync(&mut zk).unwrap().unwrap();
    assert!(matches!(
        b.call(&mut zk, now, &read),
        Ok(Reply::Exists(Some(_)))
    ));
    // a has seen the write; server 2 lagging behind it refuses a.
    zk.set_lag(2, true);
    a.call(&mut zk, now, &create("/y", CreateMode::Persistent))
        .unwrap();
    assert!(matches!(
        a.reconnect(&mut zk, 2),
        Err(Refused::Behind { .. })
    ));
    // Moving to server 1 leaves the old connection behind.
    let old = a.conn;
    zk.set_lag(1, false);
    a.reconnect(&mut zk, 1).unwrap();
    assert_eq!(
        zk.request(now, old, a.session, &read).err(),
        Some(ZkCode::SessionMoved)
    );
    // Server 1 loses the quorum: its clients are disconnected and it admits nobody.
    zk.cut_off(1);
    assert_eq!(a.call(&mut zk, now, &read), Err(ZkCode::ConnectionLoss));
    assert_eq!(a.reconnect(&mut zk, 1), Err(Refused::CutOff));
    a.reconnect(&mut zk, 0).unwrap();
    assert!(matches!(
        a.call(&mut zk, now, &read),
        Ok(Reply::Exists(Some(_)))
    ));
}
