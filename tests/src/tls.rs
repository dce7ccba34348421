//! Certificates for TLS tests, made in the test with `rcgen`: a self-signed
//! CA, a server certificate it signs for `127.0.0.1` and `localhost`, and a
//! client certificate it signs, all written as PEM files ZooKeeper 3.8 reads
//! directly (`ssl.keyStore.type=PEM`: the key and the certificate in one
//! file; the trust store is the CA certificate).
//!
//! ```no_run
//! use zkelect_tests::{TestPki, ZkServer};
//!
//! let pki = TestPki::generate()?;
//! let server = ZkServer::builder().tls(&pki).start()?;
//! let hosts = server.secure_connect_string().expect("a TLS port");
//! # Ok::<(), zkelect_tests::FixtureError>(())
//! ```

use std::fs;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::error::{FixtureError, Result};

/// A CA, a server and a client certificate, as PEM strings and files in a
/// temporary directory removed on drop.
#[derive(Debug)]
pub struct TestPki {
    ca_pem: String,
    client_cert_pem: String,
    client_key_pem: String,
    paths: PkiPaths,
    /// Declared last: removed after everything else is dropped.
    _dir: tempfile::TempDir,
}

/// Where [`TestPki`] wrote its files.
#[derive(Debug, Clone)]
struct PkiPaths {
    ca: PathBuf,
    server_keystore: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

fn tls_error(what: &str, e: impl std::fmt::Display) -> FixtureError {
    FixtureError::InvalidConfig(format!("cannot make the test {what}: {e}"))
}

/// A self-signed CA certificate and its issuer.
fn new_ca(name: &str) -> Result<(String, Issuer<'static, KeyPair>)> {
    let key = KeyPair::generate().map_err(|e| tls_error("CA key", e))?;
    let mut params =
        CertificateParams::new(Vec::<String>::new()).map_err(|e| tls_error("CA", e))?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params.self_signed(&key).map_err(|e| tls_error("CA", e))?;
    Ok((cert.pem(), Issuer::new(params, key)))
}

/// A certificate for `names` signed by `issuer`: `(cert PEM, key PEM)`.
fn leaf(
    issuer: &Issuer<'_, KeyPair>,
    common_name: &str,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> Result<(String, String)> {
    let key = KeyPair::generate().map_err(|e| tls_error("key", e))?;
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    // rcgen makes an IP address SAN of every name that parses as one.
    let mut params = CertificateParams::new(names).map_err(|e| tls_error("certificate", e))?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    let cert = params
        .signed_by(&key, issuer)
        .map_err(|e| tls_error("certificate", e))?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn write(path: &Path, contents: &str) -> Result<()> {
    fs::write(path, contents)
        .map_err(|e| FixtureError::io(format!("cannot write {}", path.display()), e))
}

impl TestPki {
    /// Makes a new CA, a server certificate for `127.0.0.1` and `localhost`,
    /// and a client certificate, and writes them to a temporary directory.
    ///
    /// # Errors
    ///
    /// [`FixtureError::InvalidConfig`] if a certificate cannot be made,
    /// [`FixtureError::Io`] if a file cannot be written.
    pub fn generate() -> Result<TestPki> {
        let (ca_pem, issuer) = new_ca("zkelect test CA")?;
        let (server_cert, server_key) = leaf(
            &issuer,
            "zkelect test server",
            &["127.0.0.1", "localhost"],
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        let (client_cert_pem, client_key_pem) = leaf(
            &issuer,
            "zkelect test client",
            &["zkelect-client"],
            ExtendedKeyUsagePurpose::ClientAuth,
        )?;
        let dir = tempfile::Builder::new()
            .prefix("zkelect-pki-")
            .tempdir()
            .map_err(|e| FixtureError::io("cannot create a temporary directory", e))?;
        let paths = PkiPaths {
            ca: dir.path().join("ca.pem"),
            server_keystore: dir.path().join("server-keystore.pem"),
            client_cert: dir.path().join("client.pem"),
            client_key: dir.path().join("client-key.pem"),
        };
        write(&paths.ca, &ca_pem)?;
        // ZooKeeper's PEM key store: the private key and the certificate chain.
        write(
            &paths.server_keystore,
            &format!("{server_key}{server_cert}{ca_pem}"),
        )?;
        write(&paths.client_cert, &client_cert_pem)?;
        write(&paths.client_key, &client_key_pem)?;
        Ok(TestPki {
            ca_pem,
            client_cert_pem,
            client_key_pem,
            paths,
            _dir: dir,
        })
    }

    /// A CA certificate (PEM) that signed nothing here: a client trusting
    /// only it must refuse the server.
    ///
    /// # Errors
    ///
    /// [`FixtureError::InvalidConfig`] if it cannot be made.
    pub fn unrelated_ca_pem() -> Result<String> {
        Ok(new_ca("some other CA")?.0)
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA certificate's file (also the servers' trust store).
    pub fn ca_path(&self) -> &Path {
        &self.paths.ca
    }

    /// The client certificate, PEM.
    pub fn client_cert_pem(&self) -> &str {
        &self.client_cert_pem
    }

    /// The client's private key, PEM (PKCS#8).
    pub fn client_key_pem(&self) -> &str {
        &self.client_key_pem
    }

    /// The client certificate's file.
    pub fn client_cert_path(&self) -> &Path {
        &self.paths.client_cert
    }

    /// The client key's file.
    pub fn client_key_path(&self) -> &Path {
        &self.paths.client_key
    }

    /// The server's key store: key and certificate chain, PEM.
    pub fn server_keystore_path(&self) -> &Path {
        &self.paths.server_keystore
    }
}

/// Whether a TLS server asks clients for a certificate (`ssl.clientAuth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// Never asks.
    #[default]
    None,
    /// Asks; a client without one is still served.
    Want,
    /// A client without a certificate signed by the CA is refused.
    Need,
}

impl ClientAuth {
    pub(crate) fn as_config(self) -> &'static str {
        match self {
            ClientAuth::None => "none",
            ClientAuth::Want => "want",
            ClientAuth::Need => "need",
        }
    }
}

/// A server's TLS files and settings (see `ZkServerBuilder::tls`).
#[derive(Debug, Clone)]
pub(crate) struct ServerTls {
    pub(crate) keystore: PathBuf,
    pub(crate) truststore: PathBuf,
    pub(crate) client_auth: ClientAuth,
}

impl ServerTls {
    pub(crate) fn new(pki: &TestPki) -> Self {
        ServerTls {
            keystore: pki.server_keystore_path().to_path_buf(),
            truststore: pki.ca_path().to_path_buf(),
            client_auth: ClientAuth::None,
        }
    }

    /// The `zoo.cfg` lines: a Netty connection factory (the only one with
    /// TLS) and a `secureClientPort` next to the plain one.
    pub(crate) fn config_lines(&self, secure_port: u16) -> Vec<(String, String)> {
        let mut lines = vec![
            (
                "serverCnxnFactory".to_owned(),
                "org.apache.zookeeper.server.NettyServerCnxnFactory".to_owned(),
            ),
            ("secureClientPort".to_owned(), secure_port.to_string()),
            ("secureClientPortAddress".to_owned(), "127.0.0.1".to_owned()),
            (
                "ssl.keyStore.location".to_owned(),
                self.keystore.display().to_string(),
            ),
            ("ssl.keyStore.type".to_owned(), "PEM".to_owned()),
            (
                "ssl.trustStore.location".to_owned(),
                self.truststore.display().to_string(),
            ),
            ("ssl.trustStore.type".to_owned(), "PEM".to_owned()),
            (
                "ssl.clientAuth".to_owned(),
                self.client_auth.as_config().to_owned(),
            ),
        ];
        // The JVM's default host name check on client certificates would
        // need the client's address in its certificate.
        lines.push(("ssl.hostnameVerification".to_owned(), "false".to_owned()));
        lines
    }
}
