#!/usr/bin/env bash
# Installs what the tests need: cargo-nextest, the runner scripts/test.sh
# uses; and what the end-to-end tests (crate zkelect-tests) need:
#   * real ZooKeeper servers: Debian's `zookeeper` package (3.8, its jars under
#     /usr/share/java) and a Java runtime;
#   * the foreign contenders of the interop tests (tests/interop/): Apache
#     Curator 5.4's LeaderLatch (Debian's `libcurator-*-java`, which bring
#     guava and slf4j-api), compiled with `javac` (`default-jdk-headless`), and
#     kazoo 2.8's Election (`python3-kazoo`, run by Debian's /usr/bin/python3,
#     not whatever `python3` comes first on PATH);
#   * what `cargo doc -p zkelect --all-features` and the feature matrix of
#     scripts/test.sh need to build the `zookeeper-client-gssapi` feature:
#     libgssapi-sys binds the system's GSSAPI with bindgen, so the Kerberos
#     headers (Debian's `libkrb5-dev`, with `krb5-config`) and libclang with
#     its own headers (`libclang-dev`).
# Idempotent: installs only what is missing, says what it did, and fails
# loudly if an install fails or leaves something missing.
#
# Runs as root, or through sudo when not root and sudo exists.
# Usage: scripts/test-deps.sh
set -euo pipefail

log() { printf 'test-deps: %s\n' "$*"; }
die() { printf 'test-deps: ERROR: %s\n' "$*" >&2; exit 1; }

ZK_JARS=(/usr/share/java/zookeeper.jar /usr/share/java/zookeeper-jute.jar)
JRE_PACKAGE=openjdk-17-jre-headless
ZK_PACKAGE=zookeeper
CURATOR_JARS=(/usr/share/java/curator-recipes.jar /usr/share/java/curator-framework.jar /usr/share/java/curator-client.jar)
CURATOR_PACKAGES=(libcurator-recipes-java libcurator-framework-java libcurator-client-java)
# Dependencies of the Curator packages; listed on their own so that a machine
# where only these went missing gets them back.
GUAVA_JAR=/usr/share/java/guava.jar
GUAVA_PACKAGE=libguava-java
SLF4J_JAR=/usr/share/java/slf4j-api.jar
SLF4J_PACKAGE=libslf4j-java
JDK_PACKAGE=default-jdk-headless
# The same interpreter the tests run (tests/src/foreign.rs).
KAZOO_PYTHON=${ZKELECT_PYTHON:-/usr/bin/python3}
KAZOO_PACKAGE=python3-kazoo
KRB5_HEADER=/usr/include/gssapi/gssapi.h
KRB5_PACKAGE=libkrb5-dev
LIBCLANG_PACKAGE=libclang-dev

# The test runner of scripts/test.sh (.config/nextest.toml says why): when
# missing, built from crates.io with Cargo, at the version the suite was
# tested with and with the dependencies its own lock file pins (--locked).
NEXTEST_VERSION=0.9.143
if ! cargo nextest --version >/dev/null 2>&1; then
    log "cargo-nextest missing: installing cargo-nextest $NEXTEST_VERSION with cargo install (a few minutes)"
    cargo install --locked --quiet "cargo-nextest@$NEXTEST_VERSION" \
        || die "cargo install cargo-nextest@$NEXTEST_VERSION failed"
    cargo nextest --version >/dev/null 2>&1 || die "cargo-nextest installed but 'cargo nextest' does not run"
fi

have_java() {
    if [[ -n "${ZKELECT_JAVA:-}" && -x "${ZKELECT_JAVA}" ]]; then return 0; fi
    if [[ -n "${JAVA_HOME:-}" && -x "${JAVA_HOME}/bin/java" ]]; then return 0; fi
    command -v java >/dev/null 2>&1
}

# Looked for where tests/src/foreign.rs looks.
have_javac() {
    if [[ -n "${ZKELECT_JAVAC:-}" && -x "${ZKELECT_JAVAC}" ]]; then return 0; fi
    if [[ -n "${JAVA_HOME:-}" && -x "${JAVA_HOME}/bin/javac" ]]; then return 0; fi
    command -v javac >/dev/null 2>&1
}

# Where bindgen (clang-sys) looks for libclang (libclang.so or libclang-N.so,
# not libclang-cpp): $LIBCLANG_PATH, else the system's library directories.
have_libclang() {
    local dir
    for dir in ${LIBCLANG_PATH:-} /usr/lib/llvm-*/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
        compgen -G "$dir/libclang.so*" >/dev/null || compgen -G "$dir/libclang-[0-9]*.so*" >/dev/null \
            && return 0
    done
    return 1
}

have_krb5() { [[ -f "$KRB5_HEADER" ]] && command -v krb5-config >/dev/null 2>&1; }

have_files() {
    local file
    for file in "$@"; do
        [[ -f "$file" ]] || return 1
    done
}

have_zookeeper() { have_files "${ZK_JARS[@]}"; }

have_kazoo() {
    [[ -x "$KAZOO_PYTHON" ]] && "$KAZOO_PYTHON" -c 'import kazoo' >/dev/null 2>&1
}

packages=()
if have_zookeeper; then
    log "ZooKeeper jars present (${ZK_JARS[*]}): nothing to do"
else
    log "ZooKeeper jars missing (${ZK_JARS[*]}): will install package '$ZK_PACKAGE'"
    packages+=("$ZK_PACKAGE")
fi
if have_java; then
    log "Java present ($(command -v java || echo "${ZKELECT_JAVA:-${JAVA_HOME:-}}")): nothing to do"
else
    log "Java missing: will install package '$JRE_PACKAGE'"
    packages+=("$JRE_PACKAGE")
fi
if have_javac; then
    log "javac present ($(command -v javac || echo "${ZKELECT_JAVAC:-${JAVA_HOME:-}}")): nothing to do"
else
    log "javac missing: will install package '$JDK_PACKAGE'"
    packages+=("$JDK_PACKAGE")
fi
if have_files "${CURATOR_JARS[@]}"; then
    log "Curator jars present (${CURATOR_JARS[*]}): nothing to do"
else
    log "Curator jars missing (${CURATOR_JARS[*]}): will install packages ${CURATOR_PACKAGES[*]}"
    packages+=("${CURATOR_PACKAGES[@]}")
fi
if have_files "$GUAVA_JAR"; then
    log "guava present ($GUAVA_JAR): nothing to do"
else
    log "guava missing ($GUAVA_JAR): will install package '$GUAVA_PACKAGE'"
    packages+=("$GUAVA_PACKAGE")
fi
if have_files "$SLF4J_JAR"; then
    log "slf4j-api present ($SLF4J_JAR): nothing to do"
else
    log "slf4j-api missing ($SLF4J_JAR): will install package '$SLF4J_PACKAGE'"
    packages+=("$SLF4J_PACKAGE")
fi
if have_kazoo; then
    log "kazoo present ($KAZOO_PYTHON -c 'import kazoo'): nothing to do"
elif [[ "$KAZOO_PYTHON" != /usr/bin/python3 ]]; then
    die "ZKELECT_PYTHON=$KAZOO_PYTHON cannot import kazoo: install kazoo 2.8 for it, or unset ZKELECT_PYTHON to use Debian's /usr/bin/python3 and package '$KAZOO_PACKAGE'"
else
    log "kazoo missing ($KAZOO_PYTHON cannot import it): will install package '$KAZOO_PACKAGE'"
    packages+=("$KAZOO_PACKAGE")
fi
if have_krb5; then
    log "Kerberos headers present ($KRB5_HEADER, $(command -v krb5-config)): nothing to do"
else
    log "Kerberos headers missing ($KRB5_HEADER or krb5-config): will install package '$KRB5_PACKAGE'"
    packages+=("$KRB5_PACKAGE")
fi
if have_libclang; then
    log "libclang present (for bindgen): nothing to do"
else
    log "libclang missing (bindgen needs it for libgssapi-sys): will install package '$LIBCLANG_PACKAGE'"
    packages+=("$LIBCLANG_PACKAGE")
fi

if [[ ${#packages[@]} -eq 0 ]]; then
    log "all test dependencies are installed"
    exit 0
fi

command -v apt-get >/dev/null 2>&1 \
    || die "apt-get not found: install ${packages[*]} (ZooKeeper 3.8, a Java 17 runtime and JDK, Curator 5.4, kazoo 2.8, Kerberos headers, libclang) by hand, or set ZOOKEEPER_HOME / ZKELECT_ZK_CLASSPATH, ZKELECT_JAVA, ZKELECT_JAVAC and ZKELECT_PYTHON"

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo)
        log "not root: using sudo"
    else
        die "not root and sudo is not available: run this script as root to install ${packages[*]}"
    fi
fi

export DEBIAN_FRONTEND=noninteractive
log "running apt-get update"
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q \
    || die "apt-get update failed"
log "installing ${packages[*]}"
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${packages[@]}" \
    || die "apt-get install ${packages[*]} failed"

have_zookeeper || die "package '$ZK_PACKAGE' installed but ${ZK_JARS[*]} still missing"
have_java || die "package '$JRE_PACKAGE' installed but no 'java' on PATH"
have_javac || die "package '$JDK_PACKAGE' installed but no 'javac' on PATH"
have_files "${CURATOR_JARS[@]}" || die "packages ${CURATOR_PACKAGES[*]} installed but ${CURATOR_JARS[*]} still missing"
have_files "$GUAVA_JAR" || die "package '$GUAVA_PACKAGE' installed but $GUAVA_JAR still missing"
have_files "$SLF4J_JAR" || die "package '$SLF4J_PACKAGE' installed but $SLF4J_JAR still missing"
have_kazoo || die "package '$KAZOO_PACKAGE' installed but $KAZOO_PYTHON still cannot import kazoo"
have_krb5 || die "package '$KRB5_PACKAGE' installed but $KRB5_HEADER or krb5-config still missing"
have_libclang || die "package '$LIBCLANG_PACKAGE' installed but no libclang.so found (set LIBCLANG_PATH)"
log "installed ${packages[*]}; java: $(command -v java), javac: $(command -v javac)"
