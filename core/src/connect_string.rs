//! The connect string, `host:port[,host:port…][/chroot]`, split and checked
//! once, the same way for every transport, before any traffic.
//!
//! The clients split it differently (zookeeper-async cuts the chroot at the
//! first `/` of the whole string; zookeeper-client at the first `/` of the
//! last server, after its `tcp://` or `tcp+tls://` scheme), so a string they
//! would read differently is refused: a chroot may only follow the last
//! server. The chroot is held to the server's path rules
//! ([`validate_chroot`]), so a chroot the server would refuse on every
//! request (`/apps//x`, `/apps/x/`, an emoji) is refused here instead.
//!
//! Host names are not resolved here (that is I/O, the adapters' part): a
//! name is only checked for shape.
//!
//! ```
//! use zkelect_core::connect_string::{ConnectString, Scheme};
//!
//! let parsed = ConnectString::parse("zk1:2181, zk2 ,tcp+tls://[::1]:2281/apps/x")?;
//! assert_eq!(parsed.servers.len(), 3);
//! assert_eq!(parsed.servers[1].to_string(), "zk2:2181"); // the default port
//! assert_eq!(parsed.servers[2].scheme, Some(Scheme::Tls));
//! assert_eq!(parsed.servers[2].host, "::1");
//! assert_eq!(parsed.chroot.as_deref(), Some("/apps/x"));
//! assert!(ConnectString::parse("zk1:2181/apps//x").is_err());
//! # Ok::<(), zkelect_core::ConfigError>(())
//! ```

use std::fmt;

use crate::config::{validate_chroot, ConfigError};

/// ZooKeeper's client port, when a server is given without one.
pub const DEFAULT_PORT: u16 = 2181;

/// A server's transport scheme prefix, as zookeeper-client reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// `tcp://`: plain TCP.
    Plain,
    /// `tcp+tls://`: TLS.
    Tls,
}

/// One server of a connect string.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Server {
    /// The scheme prefix, if one was written.
    pub scheme: Option<Scheme>,
    /// The host: a name, an IPv4 address, or an IPv6 address (without its brackets).
    pub host: String,
    /// The port ([`DEFAULT_PORT`] if none was written).
    pub port: u16,
}

impl Server {
    /// `host:port` as a resolver takes it (IPv6 in brackets), without the scheme.
    pub fn host_port(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.scheme {
            None => {}
            Some(Scheme::Plain) => f.write_str("tcp://")?,
            Some(Scheme::Tls) => f.write_str("tcp+tls://")?,
        }
        f.write_str(&self.host_port())
    }
}

/// A connect string, split: its servers in the order written, and its chroot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectString {
    /// The servers, in the order written (at least one).
    pub servers: Vec<Server>,
    /// The chroot, if any (`/` alone is none).
    pub chroot: Option<String>,
}

impl ConnectString {
    /// Splits and checks `s`.
    ///
    /// Errors: [`ConfigError::InvalidConnect`] for a string no client could
    /// use (empty, an empty server, a bad port, a chroot before the last
    /// server), [`ConfigError::InvalidChroot`] for a chroot that breaks the
    /// server's path rules.
    pub fn parse(s: &str) -> Result<Self, ConfigError> {
        let bad = |reason: String| ConfigError::InvalidConnect {
            connect: s.chars().take(200).collect(),
            reason,
        };
        if s.trim().is_empty() {
            return Err(bad("no servers given".into()));
        }
        let entries: Vec<&str> = s.split(',').map(str::trim).collect();
        let last = entries.len() - 1;
        let mut servers = Vec::with_capacity(entries.len());
        let mut chroot = None;
        for (i, entry) in entries.into_iter().enumerate() {
            let (scheme, rest) = if let Some(rest) = entry.strip_prefix("tcp://") {
                (Some(Scheme::Plain), rest)
            } else if let Some(rest) = entry.strip_prefix("tcp+tls://") {
                (Some(Scheme::Tls), rest)
            } else {
                (None, entry)
            };
            let address = match rest.find('/') {
                Some(at) if i == last => {
                    let root = &rest[at..];
                    validate_chroot(root)?;
                    if root != "/" {
                        chroot = Some(root.to_owned());
                    }
                    &rest[..at]
                }
                Some(_) => {
                    return Err(bad(format!(
                        "server {} holds a '/': a chroot may only follow the last server",
                        i + 1
                    )))
                }
                None => rest,
            };
            let (host, port) =
                host_port(address).map_err(|why| bad(format!("server {}: {why}", i + 1)))?;
            servers.push(Server { scheme, host, port });
        }
        Ok(Self { servers, chroot })
    }
}

/// `host[:port]` or `[v6][:port]`: the host and the port.
fn host_port(address: &str) -> Result<(String, u16), String> {
    if address.is_empty() {
        return Err("empty".into());
    }
    let (host, port) = if let Some(rest) = address.strip_prefix('[') {
        let Some(close) = rest.find(']') else {
            return Err(format!("{address:?}: no ']' after an IPv6 address"));
        };
        let after = &rest[close + 1..];
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| format!("{address:?}: expected ':' after ']'"))?,
            ),
        };
        (&rest[..close], port)
    } else {
        match address.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (address, None),
        }
    };
    if host.is_empty() {
        return Err(format!("{address:?}: empty host"));
    }
    if host.contains(char::is_whitespace) || host.contains(['[', ']']) {
        return Err(format!("{address:?}: not a host name or address"));
    }
    let port = match port {
        None | Some("") => DEFAULT_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n != 0 => n,
            _ => return Err(format!("{address:?}: bad port {p:?}")),
        },
    };
    Ok((host.to_owned(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(s: &str) -> Vec<String> {
        ConnectString::parse(s)
            .unwrap()
            .servers
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn servers_and_chroots_split_as_both_clients_agree() {
        assert_eq!(servers("a:1"), ["a:1"]);
        assert_eq!(servers("a:1, b:2 ,c:3/svc/x"), ["a:1", "b:2", "c:3"]);
        assert_eq!(
            servers("[::1]:2181,127.0.0.1:2/"),
            ["[::1]:2181", "127.0.0.1:2"]
        );
        assert_eq!(servers("a,[::1]"), ["a:2181", "[::1]:2181"]);
        assert_eq!(
            servers("tcp://a:1,tcp+tls://b:2"),
            ["tcp://a:1", "tcp+tls://b:2"]
        );
        let parsed = ConnectString::parse("a:1,tcp+tls://b:2/apps/x").unwrap();
        assert_eq!(parsed.chroot.as_deref(), Some("/apps/x"));
        assert_eq!(ConnectString::parse("a:1/").unwrap().chroot, None);
        assert_eq!(ConnectString::parse("a:1").unwrap().chroot, None);
    }

    #[test]
    fn strings_no_client_could_use_are_refused() {
        for bad in [
            "",
            " ",
            "a:1,",
            ",a:1",
            "a:1,,b:2",
            ":1",
            "a:0",
            "a:x",
            "a:65536",
            "[::1",
            "[::1]x",
            "a:1/x,b:2",
            "a b:1",
            "tcp://",
        ] {
            assert!(
                matches!(
                    ConnectString::parse(bad),
                    Err(ConfigError::InvalidConnect { .. })
                ),
                "{bad:?}: {:?}",
                ConnectString::parse(bad)
            );
        }
    }

    #[test]
    fn a_chroot_the_server_would_refuse_is_refused() {
        for bad in [
            "a:1/apps//x",
            "a:1/apps/x/",
            "a:1/apps/./x",
            "a:1/\u{1f680}",
            "a:1//",
        ] {
            assert!(
                matches!(
                    ConnectString::parse(bad),
                    Err(ConfigError::InvalidChroot { .. })
                ),
                "{bad:?}: {:?}",
                ConnectString::parse(bad)
            );
        }
    }
}
