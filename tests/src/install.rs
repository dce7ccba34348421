//! Finding Java and the ZooKeeper jars on this machine.

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::{FixtureError, Result};

/// What to tell someone whose machine lacks ZooKeeper or Java.
pub const TEST_DEPS_HINT: &str =
    "run `scripts/test-deps.sh` (as root, or as a user with sudo) to install Debian's `zookeeper` package and a JRE";

/// Where Debian's `libzookeeper-java` puts its jars.
const DEBIAN_JAVA_DIR: &str = "/usr/share/java";

/// Jars without which the server cannot start (Debian layout).
///
/// `zookeeper.jar`'s manifest carries a `Class-Path` naming its other
/// dependencies (netty, jackson, jetty, commons-*, metrics, snappy, slf4j-api,
/// zookeeper-jute) by absolute path under `/usr/share/java`, so the JVM finds
/// them without help; `zookeeper-jute.jar` is listed anyway, to fail early and
/// clearly if the package is half installed.
const DEBIAN_REQUIRED_JARS: &[&str] = &["zookeeper.jar", "zookeeper-jute.jar"];

/// Logging jars (Debian layout). Debian builds ZooKeeper 3.8 against log4j 1.2
/// instead of upstream's logback, and the manifest names only `slf4j-api`, so
/// without these two the server logs nothing at all (slf4j falls back to its
/// no-op logger).
const DEBIAN_LOGGING_JARS: &[&str] = &["slf4j-log4j12.jar", "log4j-1.2.jar"];

/// Netty jars the manifest forgets (Debian layout; same package,
/// `libnetty-java`). The default NIO connection factory never loads them,
/// but `NettyServerCnxnFactory` — the only one that serves a TLS port —
/// fails every connection with `ClassNotFoundException:
/// io.netty.handler.codec.ByteToMessageDecoder` without `netty-codec`, and
/// needs the resolver and the native transport's common classes too.
const DEBIAN_NETTY_JARS: &[&str] = &[
    "netty-codec.jar",
    "netty-resolver.jar",
    "netty-transport-native-unix-common.jar",
];

/// The Java runtime and class path used to run ZooKeeper servers.
///
/// Found by [`ZkInstall::detect`]; environment variables override the Debian
/// defaults:
///
/// * `ZKELECT_JAVA`: the `java` binary (else `$JAVA_HOME/bin/java`, else
///   `/usr/bin/java`, else `java` on `PATH`);
/// * `ZKELECT_ZK_CLASSPATH`: a complete class path (`:`-separated);
/// * `ZOOKEEPER_HOME`: an upstream binary release (all jars of `$ZOOKEEPER_HOME/lib`
///   and `$ZOOKEEPER_HOME`); otherwise Debian's jars under `/usr/share/java`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkInstall {
    /// The `java` binary.
    pub java: PathBuf,
    /// The JVM class path, in order.
    pub classpath: Vec<PathBuf>,
}

impl ZkInstall {
    /// Finds Java and the ZooKeeper jars, or explains what is missing.
    ///
    /// # Errors
    ///
    /// [`FixtureError::NotInstalled`] when `java` or a required jar is missing.
    pub fn detect() -> Result<ZkInstall> {
        let java = find_java()?;
        let classpath = find_classpath()?;
        Ok(ZkInstall { java, classpath })
    }

    /// Checks that `java` and every class path entry exist.
    ///
    /// # Errors
    ///
    /// [`FixtureError::NotInstalled`] naming what is missing.
    pub fn validate(&self) -> Result<()> {
        check_java(self.java.clone(), "java")?;
        let missing: Vec<String> = self
            .classpath
            .iter()
            .filter(|p| !p.exists())
            .map(|p| p.display().to_string())
            .collect();
        if self.classpath.is_empty() || !missing.is_empty() {
            return Err(FixtureError::NotInstalled {
                what: format!(
                    "ZooKeeper (class path entries missing: [{}])",
                    missing.join(", ")
                ),
                hint: TEST_DEPS_HINT.into(),
            });
        }
        Ok(())
    }

    /// The class path joined with `:`, as `java -cp` wants it.
    pub fn classpath_string(&self) -> OsString {
        let mut joined = OsString::new();
        for (i, jar) in self.classpath.iter().enumerate() {
            if i > 0 {
                joined.push(":");
            }
            joined.push(jar.as_os_str());
        }
        joined
    }
}

fn env_path(name: &str) -> Option<PathBuf> {
    env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn find_java() -> Result<PathBuf> {
    if let Some(java) = env_path("ZKELECT_JAVA") {
        return check_java(java, "ZKELECT_JAVA");
    }
    if let Some(home) = env_path("JAVA_HOME") {
        let java = home.join("bin/java");
        if java.is_file() {
            return Ok(java);
        }
    }
    let debian = PathBuf::from("/usr/bin/java");
    if debian.is_file() {
        return Ok(debian);
    }
    if let Some(path) = env::var_os("PATH") {
        for dir in env::split_paths(&path) {
            let java = dir.join("java");
            if java.is_file() {
                return Ok(java);
            }
        }
    }
    Err(FixtureError::NotInstalled {
        what: "Java (`java`: not in $ZKELECT_JAVA, $JAVA_HOME/bin, /usr/bin or PATH)".into(),
        hint: TEST_DEPS_HINT.into(),
    })
}

fn check_java(java: PathBuf, source: &str) -> Result<PathBuf> {
    if java.is_file() {
        Ok(java)
    } else {
        Err(FixtureError::NotInstalled {
            what: format!("Java ({source}={})", java.display()),
            hint: TEST_DEPS_HINT.into(),
        })
    }
}

fn find_classpath() -> Result<Vec<PathBuf>> {
    if let Some(cp) = env::var_os("ZKELECT_ZK_CLASSPATH").filter(|v| !v.is_empty()) {
        return Ok(env::split_paths(&cp).collect());
    }
    if let Some(home) = env_path("ZOOKEEPER_HOME") {
        return upstream_classpath(&home);
    }
    debian_classpath(Path::new(DEBIAN_JAVA_DIR))
}

fn debian_classpath(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut classpath = Vec::new();
    let mut missing = Vec::new();
    for jar in DEBIAN_REQUIRED_JARS {
        let path = dir.join(jar);
        if path.is_file() {
            classpath.push(path);
        } else {
            missing.push(path.display().to_string());
        }
    }
    if !missing.is_empty() {
        return Err(FixtureError::NotInstalled {
            what: format!("ZooKeeper (missing {})", missing.join(", ")),
            hint: format!("{TEST_DEPS_HINT}; or set ZOOKEEPER_HOME or ZKELECT_ZK_CLASSPATH"),
        });
    }
    classpath.extend(
        DEBIAN_LOGGING_JARS
            .iter()
            .chain(DEBIAN_NETTY_JARS)
            .map(|jar| dir.join(jar))
            .filter(|p| p.is_file()),
    );
    Ok(classpath)
}

fn upstream_classpath(home: &Path) -> Result<Vec<PathBuf>> {
    let mut classpath = Vec::new();
    for dir in [home.join("lib"), home.to_path_buf()] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut jars: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "jar"))
            .collect();
        jars.sort();
        classpath.extend(jars);
    }
    let has_zk = classpath.iter().any(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("zookeeper-3") || n == "zookeeper.jar")
    });
    if has_zk {
        Ok(classpath)
    } else {
        Err(FixtureError::NotInstalled {
            what: format!(
                "ZooKeeper (no zookeeper-3*.jar under ZOOKEEPER_HOME={})",
                home.display()
            ),
            hint: TEST_DEPS_HINT.into(),
        })
    }
}
