//! The zookeeper-client transport's settings: the shared [`SessionOptions`]
//! with this client's own (TLS, SASL), and how the TLS ones are read.

#[cfg(feature = "zookeeper-client-tls")]
use std::sync::Arc;
use std::time::Duration;

#[cfg(any(
    feature = "zookeeper-client-tls",
    feature = "zookeeper-client-sasl",
    feature = "zookeeper-client-gssapi"
))]
use zookeeper_client as zkc;

#[cfg(feature = "zookeeper-client-tls")]
use super::preflight;
use crate::error::SessionError;
#[cfg(feature = "zookeeper-client-tls")]
use crate::error::TlsError;
use crate::shell::SessionOptions;

/// How to reach the servers with the zookeeper-client transport: the shared
/// [`SessionOptions`] with this client's own settings (TLS, SASL).
///
/// A host may be prefixed with `tcp://` (plain) or `tcp+tls://` (TLS);
/// without a prefix it uses TLS if `tls` is set (feature
/// `zookeeper-client-tls`), plain TCP otherwise. The connect timeout also
/// bounds each attempt to open a new session after an expiry, and the
/// reconnect delay is the pause between those attempts.
///
/// ```
/// use std::time::Duration;
/// use zkelect::zk_client::ZkClientOptions;
///
/// let options = ZkClientOptions::new("zk1:2181,zk2:2181/chroot")
///     .session_timeout(Duration::from_secs(6))
///     .connect_timeout(Duration::from_secs(5))
///     .digest("svc:secret");
/// assert_eq!(options.auth[0].0, "digest");
/// assert!(!format!("{options:?}").contains("secret"));
/// ```
pub type ZkClientOptions = SessionOptions<ZkClientExtras>;

/// What only the zookeeper-client transport needs ([`ZkClientOptions::client`]).
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct ZkClientExtras {
    /// TLS settings (feature `zookeeper-client-tls`).
    #[cfg(feature = "zookeeper-client-tls")]
    pub tls: Option<TlsSettings>,
    /// SASL settings (features `zookeeper-client-sasl`, `zookeeper-client-gssapi`).
    #[cfg(any(feature = "zookeeper-client-sasl", feature = "zookeeper-client-gssapi"))]
    pub sasl: Option<zkc::SaslOptions>,
}

impl std::fmt::Debug for ZkClientExtras {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print credentials (the SASL options' own Debug shows the password).
        let mut d = f.debug_struct("ZkClientExtras");
        #[cfg(feature = "zookeeper-client-tls")]
        d.field("tls", &self.tls);
        #[cfg(any(feature = "zookeeper-client-sasl", feature = "zookeeper-client-gssapi"))]
        d.field("sasl", &self.sasl.is_some());
        d.finish()
    }
}

impl SessionOptions<ZkClientExtras> {
    /// Talks TLS to every host not prefixed with `tcp://`.
    #[cfg(feature = "zookeeper-client-tls")]
    #[must_use]
    pub fn tls(mut self, tls: TlsSettings) -> Self {
        self.client.tls = Some(tls);
        self
    }

    /// Authenticates with SASL (DIGEST-MD5 or GSSAPI options built with
    /// [`client::SaslOptions`](crate::zk_client::client::SaslOptions)).
    #[cfg(any(feature = "zookeeper-client-sasl", feature = "zookeeper-client-gssapi"))]
    #[must_use]
    pub fn sasl(mut self, sasl: impl Into<zkc::SaslOptions>) -> Self {
        self.client.sasl = Some(sasl.into());
        self
    }

    /// Authenticates with SASL DIGEST-MD5 as `user`.
    #[cfg(feature = "zookeeper-client-sasl")]
    #[must_use]
    pub fn sasl_digest_md5(self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.sasl(zkc::SaslOptions::digest_md5(user.into(), password.into()))
    }
}

/// TLS settings: the CA that signs the servers' certificates, and
/// optionally a client certificate for servers that ask for one
/// (`ssl.clientAuth=need`). PEM throughout.
///
/// The server's certificate must name the host as written in the connect
/// string (a DNS name or an IP address in its subject alternative names):
/// the client derives the expected server name from the host, and this
/// crate offers no way around hostname verification — the client has one
/// only as an `unsafe fn`, this workspace forbids `unsafe`, and it would let
/// anyone with a certificate from the same CA stand in for the servers.
#[cfg(feature = "zookeeper-client-tls")]
#[derive(Clone)]
pub struct TlsSettings {
    ca_pem: String,
    identity: Option<(String, String)>,
}

#[cfg(feature = "zookeeper-client-tls")]
impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("ca_pem_bytes", &self.ca_pem.len())
            .field("client_certificate", &self.identity.is_some())
            .finish()
    }
}

#[cfg(feature = "zookeeper-client-tls")]
impl TlsSettings {
    /// Trusts the CA certificate(s) in `ca_pem`. Checked at connect.
    pub fn from_ca_pem(ca_pem: impl Into<String>) -> Self {
        Self {
            ca_pem: ca_pem.into(),
            identity: None,
        }
    }

    /// Trusts the CA certificate(s) in the PEM file at `path`.
    ///
    /// Fails with [`TlsError::Config`] if it cannot be read.
    pub fn from_ca_file(path: impl AsRef<std::path::Path>) -> Result<Self, SessionError> {
        Ok(Self::from_ca_pem(read_pem(path.as_ref(), "CA file")?))
    }

    /// Presents this client certificate (PEM chain) and private key (PEM,
    /// PKCS#8, PKCS#1 or SEC1) to servers that ask for one.
    #[must_use]
    pub fn identity_pem(mut self, cert_pem: impl Into<String>, key_pem: impl Into<String>) -> Self {
        self.identity = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// As [`identity_pem`](Self::identity_pem), from files.
    ///
    /// Fails with [`TlsError::Config`] if one cannot be read.
    pub fn identity_files(
        self,
        cert: impl AsRef<std::path::Path>,
        key: impl AsRef<std::path::Path>,
    ) -> Result<Self, SessionError> {
        let cert = read_pem(cert.as_ref(), "client certificate file")?;
        let key = read_pem(key.as_ref(), "client key file")?;
        Ok(self.identity_pem(cert, key))
    }

    /// The client's TLS options and the pre-flight check's configuration.
    pub(super) fn build(&self) -> Result<(zkc::TlsOptions, Arc<rustls::ClientConfig>), TlsError> {
        let config = |what: &str, reason: String| TlsError::Config {
            what: what.to_owned(),
            reason,
        };
        let mut options = zkc::TlsOptions::new()
            .with_pem_ca(&self.ca_pem)
            .map_err(|e| config("CA", e.to_string()))?;
        if let Some((cert, key)) = &self.identity {
            options = options
                .with_pem_identity(cert, key)
                .map_err(|e| config("client certificate and key", e.to_string()))?;
        }
        let preflight = preflight::client_config(&self.ca_pem, self.identity.as_ref())?;
        Ok((options, preflight))
    }
}

#[cfg(feature = "zookeeper-client-tls")]
fn read_pem(path: &std::path::Path, what: &str) -> Result<String, SessionError> {
    std::fs::read_to_string(path).map_err(|e| {
        SessionError::Tls(TlsError::Config {
            what: format!("{what} {}", path.display()),
            reason: e.to_string(),
        })
    })
}

impl ZkClientOptions {
    /// Checks the settings as [`ZkClientTransport::connect`](crate::ZkClientTransport::connect) does before
    /// any traffic (it calls this first): the timeouts and delays within
    /// their bounds, the connect string and its chroot well formed. A typed
    /// error for anything else, never a panic. (TLS settings are read when
    /// connecting: they name files.)
    ///
    /// ```
    /// use zkelect::zk_client::ZkClientOptions;
    /// assert!(ZkClientOptions::new("tcp+tls://[::1]:2281/apps").validate().is_ok());
    /// assert!(ZkClientOptions::new("zk1:0").validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<(), SessionError> {
        self.check(Duration::ZERO).map(drop)
    }
}
