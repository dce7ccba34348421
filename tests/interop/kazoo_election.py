#!/usr/bin/python3
"""A foreign contender for zkelect's interop tests (tests/tests/e2e/interop.rs).

One kazoo 2.8 ``Election``, run as it is documented, that reports its OWN
belief of leadership on stdout. Started by tests/src/foreign.rs with Debian's
/usr/bin/python3 (python3-kazoo); not part of any shipped artifact.

Usage: kazoo_election.py <connect string> <election path> <id>

Every stdout line is ``<CLOCK_MONOTONIC ns> <KIND> <id> [<detail>]``, flushed
at once (time.monotonic_ns() reads CLOCK_MONOTONIC on Linux, the clock the
Rust tests read):

  STARTED   the election runs (its node may not exist yet)
  NODE      the contender's node, detail = its full path (again if it changes)
  LEADER    the leader function runs: kazoo says this process leads
  FOLLOWER  the initial belief
  STATE     a connection state change, detail = kazoo's name for it
  CLOSING   asked to close: from here on it no longer acts as leader; the
            node is deleted only after this line
  CLOSED    election done and client closed; the process exits 0 right after
  ERROR     something failed, detail = the exception; exits non-zero

It closes when stdin says ``close`` or reaches EOF (the test process died).
"""

import sys
import threading
import time

from kazoo.client import KazooClient

# Short enough that a lost process frees its node quickly, long enough for a
# loaded two-core machine (the test servers allow 0.4 s to 10 s).
SESSION_S = 4.0
CONNECTION_S = 15.0
# Quick retries: the test servers are local.
RETRY = {"max_tries": -1, "delay": 0.05, "backoff": 2, "max_delay": 1.0}


class Contender:
    def __init__(self, hosts, path, ident):
        self.ident = ident
        self.path = path
        self.mutex = threading.Lock()  # guards the fields below and stdout
        self.closing = False
        self.node = None
        self.stop = threading.Event()
        self.client = KazooClient(
            hosts=hosts,
            timeout=SESSION_S,
            connection_retry=dict(RETRY),
            command_retry=dict(RETRY),
        )
        self.election = self.client.Election(path, ident)
        self.error = None

    def emit(self, kind, detail=None):
        with self.mutex:
            self._emit(kind, detail)

    def _emit(self, kind, detail=None):
        line = "%d %s %s" % (time.monotonic_ns(), kind, self.ident)
        if detail is not None:
            line += " " + detail
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def lead(self):
        with self.mutex:
            if self.closing:
                return
            self._emit("LEADER")
        self.stop.wait()

    def run(self):
        try:
            self.election.run(self.lead)
        except Exception as e:  # reported, and main exits non-zero
            self.error = e
            self.emit("ERROR", repr(e).replace("\n", " "))

    def poll_node(self):
        # kazoo sets `lock.node` once its create returns; report it (and any
        # new one after a retry) until closing.
        while True:
            node = self.election.lock.node
            with self.mutex:
                if self.closing:
                    return
                if node is not None and node != self.node:
                    self.node = node
                    self._emit("NODE", self.path + "/" + node)
            time.sleep(0.005)

    def close(self):
        with self.mutex:
            self.closing = True
            self._emit("CLOSING")
        # Ends the leader function if it runs (the lock's release deletes the
        # node), or a pending acquire if it does not.
        self.stop.set()
        self.election.cancel()


def main():
    if len(sys.argv) != 4:
        sys.stderr.write("usage: kazoo_election.py <connect string> <election path> <id>\n")
        return 64
    me = Contender(sys.argv[1], sys.argv[2], sys.argv[3])
    me.client.add_listener(lambda state: me.emit("STATE", str(state)))
    try:
        me.client.start(timeout=CONNECTION_S)
    except Exception as e:
        me.emit("ERROR", repr(e).replace("\n", " "))
        return 2
    me.emit("FOLLOWER")
    runner = threading.Thread(target=me.run, name="election", daemon=True)
    runner.start()
    me.emit("STARTED")
    threading.Thread(target=me.poll_node, name="node-poller", daemon=True).start()

    for line in sys.stdin:
        if line.strip() == "close":
            break
    me.close()
    runner.join()
    me.client.stop()
    me.client.close()
    if me.error is not None:
        return 2
    me.emit("CLOSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
