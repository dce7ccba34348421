#!/usr/bin/env bash
# Installs what the end-to-end tests (crate zkelect-tests) need to run real
# ZooKeeper servers: Debian's `zookeeper` package (3.8, its jars under
# /usr/share/java) and a Java runtime. Idempotent: installs only what is
# missing, says what it did, and fails loudly if an install fails.
#
# Runs as root, or through sudo when not root and sudo exists.
# Usage: scripts/test-deps.sh
set -euo pipefail

log() { printf 'test-deps: %s\n' "$*"; }
die() { printf 'test-deps: ERROR: %s\n' "$*" >&2; exit 1; }

ZK_JARS=(/usr/share/java/zookeeper.jar /usr/share/java/zookeeper-jute.jar)
JRE_PACKAGE=openjdk-17-jre-headless
ZK_PACKAGE=zookeeper

have_java() {
    if [[ -n "${ZKELECT_JAVA:-}" && -x "${ZKELECT_JAVA}" ]]; then return 0; fi
    if [[ -n "${JAVA_HOME:-}" && -x "${JAVA_HOME}/bin/java" ]]; then return 0; fi
    command -v java >/dev/null 2>&1
}

have_zookeeper() {
    local jar
    for jar in "${ZK_JARS[@]}"; do
        [[ -f "$jar" ]] || return 1
    done
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

if [[ ${#packages[@]} -eq 0 ]]; then
    log "all test dependencies are installed"
    exit 0
fi

command -v apt-get >/dev/null 2>&1 \
    || die "apt-get not found: install ${packages[*]} (ZooKeeper 3.8 and a Java 17 runtime) by hand, or set ZOOKEEPER_HOME / ZKELECT_ZK_CLASSPATH and ZKELECT_JAVA"

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
log "installed ${packages[*]}; java: $(command -v java)"
