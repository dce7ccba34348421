//! The pre-flight TLS handshake: the client only logs a rejected
//! certificate and retries until its timeout, so one handshake per TLS host
//! (blocking, with rustls directly and the same trust settings) finds out
//! first. The first host that completes a handshake ends the check; if none
//! does and at least one rejected the certificate, that verdict is the
//! error. Hosts that cannot be reached are left to the client.

use std::io;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, RootCertStore};
use tokio::time::Instant;
use tracing::debug;

use crate::error::{SessionError, TlsError};

/// One `host:port` of a connect string, and whether it uses TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Endpoint {
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) tls: bool,
}

impl Endpoint {
    fn label(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Parses a connect string as the client does: hosts separated by
/// commas, an optional `tcp://` or `tcp+tls://` prefix each, port 2181
/// by default, `[v6]:port`, a chroot after the last host.
pub(super) fn endpoints(hosts: &str, tls_default: bool) -> Result<Vec<Endpoint>, String> {
    let mut out = Vec::new();
    let count = hosts.split(',').count();
    for (i, item) in hosts.split(',').enumerate() {
        let (item, tls) = if let Some(rest) = item.strip_prefix("tcp://") {
            (rest, false)
        } else if let Some(rest) = item.strip_prefix("tcp+tls://") {
            (rest, true)
        } else {
            (item, tls_default)
        };
        let item = match item.find('/') {
            Some(slash) if i + 1 == count => &item[..slash],
            Some(_) => return Err(format!("a chroot may only follow the last host: {hosts:?}")),
            None => item,
        };
        let (host, port) = if let Some(rest) = item.strip_prefix('[') {
            let (host, rest) = rest
                .split_once(']')
                .ok_or_else(|| format!("unclosed '[' in {item:?}"))?;
            match rest {
                "" => (host, None),
                _ => match rest.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None => return Err(format!("bad address {item:?}")),
                },
            }
        } else {
            match item.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (item, None),
            }
        };
        if host.is_empty() {
            return Err(format!("empty host in {hosts:?}"));
        }
        let port = match port {
            None | Some("") => 2181,
            Some(port) => match port.parse::<u16>() {
                Ok(p) if p != 0 => p,
                _ => return Err(format!("bad port {port:?} in {item:?}")),
            },
        };
        out.push(Endpoint {
            host: host.to_owned(),
            port,
            tls,
        });
    }
    Ok(out)
}

/// The rustls configuration of the check: the same roots (and CRLs)
/// and client identity as the client's.
pub(super) fn client_config(
    ca_pem: &str,
    identity: Option<&(String, String)>,
) -> Result<Arc<ClientConfig>, TlsError> {
    let config = |what: &str, reason: String| TlsError::Config {
        what: what.to_owned(),
        reason,
    };
    let mut roots = RootCertStore::empty();
    let mut crls = Vec::new();
    for item in rustls_pemfile::read_all(&mut ca_pem.as_bytes()) {
        match item {
            Ok(rustls_pemfile::Item::X509Certificate(cert)) => roots
                .add(cert)
                .map_err(|e| config("CA certificate", e.to_string()))?,
            Ok(rustls_pemfile::Item::Crl(crl)) => crls.push(crl),
            Ok(_) => {}
            Err(e) => return Err(config("CA", e.to_string())),
        }
    }
    if roots.is_empty() {
        return Err(config("CA", "no certificate in the PEM".into()));
    }
    let verifier = rustls::client::WebPkiServerVerifier::builder(Arc::new(roots))
        .with_crls(crls)
        .build()
        .map_err(|e| config("CA", e.to_string()))?;
    let builder = ClientConfig::builder().with_webpki_verifier(verifier);
    let config_done = match identity {
        None => builder.with_no_client_auth(),
        Some((cert_pem, key_pem)) => {
            let certs = rustls_pemfile::certs(&mut cert_pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| config("client certificate", e.to_string()))?;
            if certs.is_empty() {
                return Err(config(
                    "client certificate",
                    "no certificate in the PEM".into(),
                ));
            }
            let key = rustls_pemfile::private_key(&mut key_pem.as_bytes())
                .map_err(|e| config("client key", e.to_string()))?
                .ok_or_else(|| config("client key", "no private key in the PEM".into()))?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| config("client certificate and key", e.to_string()))?
        }
    };
    Ok(Arc::new(config_done))
}

/// Whether the TLS server `host:port` completes a handshake by
/// `deadline`: the liveness ask of a TLS server (a frozen server does
/// not complete one; a plain ConnectRequest would not reach it).
pub(crate) async fn alive(
    host: String,
    port: u16,
    config: Arc<ClientConfig>,
    deadline: Instant,
) -> crate::startup::Answer {
    use zkelect_core::startup::AskFailure;
    let left = deadline.saturating_duration_since(Instant::now());
    let Ok(name) = ServerName::try_from(host.clone()) else {
        return Err(AskFailure::Broken(format!(
            "{host:?} is not a TLS server name"
        )));
    };
    if left.is_zero() {
        return Err(AskFailure::Silent);
    }
    let endpoint = Endpoint {
        host,
        port,
        tls: true,
    };
    let outcome = tokio::task::spawn_blocking(move || handshake(&endpoint, name, config, left))
        .await
        .unwrap_or_else(|e| Outcome::Unreachable(e.to_string()));
    match outcome {
        Outcome::Done => Ok(None),
        Outcome::Unreachable(reason) if reason.contains("refused") => {
            Err(AskFailure::Refused(reason))
        }
        Outcome::Unreachable(reason)
            if reason.contains("timed out") || reason.contains("temporarily unavailable") =>
        {
            Err(AskFailure::Silent)
        }
        Outcome::Unreachable(reason) => Err(AskFailure::Broken(reason)),
        Outcome::Refused(e) => Err(AskFailure::Broken(e.to_string())),
    }
}

/// How one handshake went.
#[derive(Debug)]
enum Outcome {
    Done,
    Unreachable(String),
    Refused(TlsError),
}

/// Runs the check (see the module docs) until `deadline`.
pub(super) async fn check(
    hosts: &str,
    config: Arc<ClientConfig>,
    deadline: Instant,
) -> Result<(), SessionError> {
    let endpoints = endpoints(hosts, true).map_err(|reason| SessionError::Connect {
        hosts: hosts.to_owned(),
        kind: crate::ConnectFailure::BadAddress,
        reason,
    })?;
    let mut refused = None;
    for endpoint in endpoints.into_iter().filter(|e| e.tls) {
        let name = ServerName::try_from(endpoint.host.clone()).map_err(|e| {
            SessionError::Tls(TlsError::Config {
                what: format!("host {:?}", endpoint.host),
                reason: format!("not a name a certificate can be checked against: {e}"),
            })
        })?;
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let config = Arc::clone(&config);
        let probe = endpoint.clone();
        let outcome = tokio::task::spawn_blocking(move || handshake(&probe, name, config, left))
            .await
            .unwrap_or_else(|e| Outcome::Unreachable(e.to_string()));
        match outcome {
            Outcome::Done => return Ok(()),
            Outcome::Unreachable(reason) => {
                debug!(
                    host = endpoint.label(),
                    reason, "TLS pre-flight: unreachable"
                );
            }
            Outcome::Refused(e) => {
                debug!(host = endpoint.label(), error = %e, "TLS pre-flight: refused");
                refused.get_or_insert(e);
            }
        }
    }
    match refused {
        Some(e) => Err(SessionError::Tls(e)),
        None => Ok(()),
    }
}

fn handshake(
    endpoint: &Endpoint,
    name: ServerName<'static>,
    config: Arc<ClientConfig>,
    timeout: Duration,
) -> Outcome {
    let label = endpoint.label();
    let addrs = match (endpoint.host.as_str(), endpoint.port).to_socket_addrs() {
        Ok(addrs) => addrs.collect::<Vec<_>>(),
        Err(e) => return Outcome::Unreachable(e.to_string()),
    };
    let mut stream = None;
    let mut last = String::from("no address");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = e.to_string(),
        }
    }
    let Some(mut stream) = stream else {
        return Outcome::Unreachable(last);
    };
    if stream.set_read_timeout(Some(timeout)).is_err()
        || stream.set_write_timeout(Some(timeout)).is_err()
    {
        return Outcome::Unreachable("cannot set socket timeouts".into());
    }
    let mut conn = match ClientConnection::new(config, name) {
        Ok(conn) => conn,
        Err(e) => {
            return Outcome::Refused(TlsError::Handshake {
                host: label,
                reason: e.to_string(),
            })
        }
    };
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(&mut stream) {
            return classify(label, &e);
        }
    }
    // Send our last flight (and a close) so the server does not log a reset.
    conn.send_close_notify();
    let _ = conn.complete_io(&mut stream);
    Outcome::Done
}

fn classify(host: String, e: &io::Error) -> Outcome {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(rustls::Error::InvalidCertificate(reason)) => Outcome::Refused(TlsError::Rejected {
            host,
            reason: format!("{reason:?}"),
        }),
        Some(other) => Outcome::Refused(TlsError::Handshake {
            host,
            reason: other.to_string(),
        }),
        None => Outcome::Unreachable(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(host: &str, port: u16, tls: bool) -> Endpoint {
        Endpoint {
            host: host.into(),
            port,
            tls,
        }
    }

    #[test]
    fn connect_strings_parse_like_the_client_does() {
        assert_eq!(
            endpoints("a:1,tcp://b,tcp+tls://[::1]:3/chroot/x", true),
            Ok(vec![
                ep("a", 1, true),
                ep("b", 2181, false),
                ep("::1", 3, true)
            ])
        );
        assert_eq!(
            endpoints("a:1,b:2", false),
            Ok(vec![ep("a", 1, false), ep("b", 2, false)])
        );
        for bad in ["a:0", "a:x", ":1", "a/x,b", "[::1", "[::1]x", "a:1,"] {
            assert!(endpoints(bad, true).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn unusable_ca_and_keys_are_config_errors() {
        for (ca, identity) in [
            ("", None),
            ("not a pem", None),
            (
                "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                None,
            ),
        ] {
            let result = client_config(ca, identity);
            assert!(
                matches!(result, Err(TlsError::Config { .. })),
                "{ca:?}: {result:?}"
            );
        }
    }
}
