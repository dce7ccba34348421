//! ZooKeeper's four-letter-word admin commands over plain TCP.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::error::{FixtureError, Result};

/// The role a server reports in the `Mode:` line of `srvr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerMode {
    /// A standalone server (`ZooKeeperServerMain`).
    Standalone,
    /// The quorum's leader.
    Leader,
    /// A follower of the quorum's leader.
    Follower,
    /// An observer.
    Observer,
    /// The server answered but is not serving requests (for a quorum member:
    /// electing a leader, or not in a quorum).
    NotServing,
}

impl ServerMode {
    /// Reads the mode from a `srvr` (or `stat`) reply.
    ///
    /// Returns `None` when the reply is neither a `Mode:` report nor the
    /// "not currently serving requests" notice.
    pub fn from_srvr(reply: &str) -> Option<ServerMode> {
        if reply.contains("not currently serving requests") {
            return Some(ServerMode::NotServing);
        }
        let mode = reply
            .lines()
            .find_map(|line| line.strip_prefix("Mode:"))?
            .trim();
        match mode {
            "standalone" => Some(ServerMode::Standalone),
            "leader" => Some(ServerMode::Leader),
            "follower" => Some(ServerMode::Follower),
            "observer" => Some(ServerMode::Observer),
            _ => None,
        }
    }

    /// Whether the server serves client requests in this mode.
    pub fn is_serving(self) -> bool {
        !matches!(self, ServerMode::NotServing)
    }
}

impl fmt::Display for ServerMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ServerMode::Standalone => "standalone",
            ServerMode::Leader => "leader",
            ServerMode::Follower => "follower",
            ServerMode::Observer => "observer",
            ServerMode::NotServing => "not serving",
        })
    }
}

/// Sends a four-letter word (`ruok`, `srvr`, `mntr`, `stat`, `cons`, ...) to a
/// server and returns its whole reply.
///
/// `timeout` bounds the connect, and then each read and write separately.
/// The server must allow the command (`4lw.commands.whitelist`); the servers
/// this crate starts allow all of them.
///
/// # Errors
///
/// [`FixtureError::FourLetterWord`] when the connection fails or times out
/// (a paused server accepts connections but never answers).
pub fn four_letter_word(addr: SocketAddr, command: &str, timeout: Duration) -> Result<String> {
    let fail = |message: String| FixtureError::FourLetterWord {
        addr: addr.to_string(),
        command: command.to_owned(),
        message,
    };
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| fail(format!("connect: {e}")))?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| fail(format!("set timeouts: {e}")))?;
    stream
        .write_all(command.as_bytes())
        .map_err(|e| fail(format!("write: {e}")))?;
    let mut reply = Vec::new();
    stream
        .read_to_end(&mut reply)
        .map_err(|e| fail(format!("read: {e}")))?;
    String::from_utf8(reply).map_err(|e| fail(format!("reply is not UTF-8: {e}")))
}

/// Parses a `mntr` reply (`key<TAB>value` lines) into a map.
pub fn parse_mntr(reply: &str) -> BTreeMap<String, String> {
    reply
        .lines()
        .filter_map(|line| {
            let (key, value) = line.split_once('\t')?;
            Some((key.trim().to_owned(), value.trim().to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_parsed() {
        let srvr = "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nMode: follower\nNode count: 5\n";
        assert_eq!(ServerMode::from_srvr(srvr), Some(ServerMode::Follower));
        assert_eq!(
            ServerMode::from_srvr("This ZooKeeper instance is not currently serving requests\n"),
            Some(ServerMode::NotServing)
        );
        assert_eq!(ServerMode::from_srvr(""), None);
    }

    #[test]
    fn mntr_is_parsed() {
        let map = parse_mntr("zk_version\t3.8.0\nzk_server_state\tleader\nzk_znode_count\t5\n");
        assert_eq!(
            map.get("zk_server_state").map(String::as_str),
            Some("leader")
        );
        assert_eq!(map.len(), 3);
    }
}
