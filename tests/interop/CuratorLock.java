// A foreign lock holder for zkelect's lock interop tests
// (tests/tests/e2e/curator_locks.rs): Apache Curator 5.4's InterProcessMutex
// (made revocable), InterProcessMultiLock and Revoker, run as they are
// documented, driven by commands on stdin, reporting its OWN belief of
// holding on stdout. Compiled and started by tests/src/foreign.rs; not part
// of any shipped artifact.
//
// Usage: java -cp <dir>:<curator jars> CuratorLock <connect string> <id>
//
// Commands, one a line:
//   mutex <path> [honour]  acquire an InterProcessMutex made revocable; its
//                          revocation listener reports REVOKE and, with
//                          `honour`, releases (on the holding thread, as
//                          Curator requires)
//   multi <path> <path>... acquire an InterProcessMultiLock over the paths,
//                          in the order given (Curator's order)
//   release                release what is held
//   revoke <node path>     Revoker.attemptRevoke on a node (any holder's)
//   close                  close the client and exit (also at EOF)
// Acquisitions and releases run on one worker thread, in order (a Curator
// lock belongs to the thread that acquired it); `revoke` runs at once, even
// while the worker waits for a lock.
//
// Every stdout line is `<CLOCK_MONOTONIC ns> <KIND> <id> [<detail>]`, flushed
// at once (System.nanoTime() reads CLOCK_MONOTONIC on Linux, the clock the
// Rust tests read):
//   STARTED   connected, ready for commands
//   NODE      a mutex's lock node, detail = its full path
//   LEADER    an acquire returned: it holds from here
//   FOLLOWER  it is about to release: it no longer holds from here
//   REVOKE    its revocation listener ran (someone asked it to let go)
//   DONE      a command finished, detail = the command's name
//   CLOSING / CLOSED  closing; the process exits 0 right after CLOSED
//   ERROR     something failed, detail = the exception; exits non-zero

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMultiLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorLock {
    private static final int SESSION_MS = 4000;
    private static final int CONNECTION_MS = 15000;

    /** An InterProcessMutex that tells its node's path. */
    private static final class Mutex extends InterProcessMutex {
        Mutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String node() {
            return getLockPath();
        }
    }

    private final String id;
    private final CuratorFramework client;
    private final ExecutorService worker = Executors.newSingleThreadExecutor();
    // Touched by the worker thread only.
    private InterProcessLock held = null;

    private CuratorLock(CuratorFramework client, String id) {
        this.client = client;
        this.id = id;
    }

    private synchronized void emit(String kind, String detail) {
        StringBuilder line = new StringBuilder();
        line.append(System.nanoTime()).append(' ').append(kind).append(' ').append(id);
        if (detail != null) {
            line.append(' ').append(detail);
        }
        System.out.println(line);
        System.out.flush();
    }

    private void fail(Exception e) {
        emit("ERROR", e.toString().replace('\n', ' '));
        e.printStackTrace();
        System.exit(2);
    }

    /** Runs `task` on the worker; a failure ends the process. */
    private void onWorker(String name, ThrowingTask task) {
        worker.submit(() -> {
            try {
                task.run();
                emit("DONE", name);
            } catch (Exception e) {
                fail(e);
            }
        });
    }

    private interface ThrowingTask {
        void run() throws Exception;
    }

    private void release() throws Exception {
        if (held == null) {
            return;
        }
        emit("FOLLOWER", null);
        InterProcessLock lock = held;
        held = null;
        lock.release();
    }

    private void command(String line) throws Exception {
        List<String> words = new ArrayList<>(Arrays.asList(line.trim().split("\\s+")));
        String name = words.remove(0);
        switch (name) {
            case "mutex": {
                String path = words.get(0);
                boolean honour = words.size() > 1 && words.get(1).equals("honour");
                onWorker(name, () -> {
                    Mutex mutex = new Mutex(client, path);
                    mutex.makeRevocable(m -> {
                        emit("REVOKE", null);
                        if (honour) {
                            onWorker("release", this::release);
                        }
                    });
                    mutex.acquire();
                    held = mutex;
                    emit("NODE", mutex.node());
                    emit("LEADER", null);
                });
                break;
            }
            case "multi": {
                List<String> paths = new ArrayList<>(words);
                onWorker(name, () -> {
                    InterProcessMultiLock multi = new InterProcessMultiLock(client, paths);
                    multi.acquire();
                    held = multi;
                    emit("LEADER", null);
                });
                break;
            }
            case "release":
                onWorker(name, this::release);
                break;
            case "revoke":
                Revoker.attemptRevoke(client, words.get(0));
                emit("DONE", name);
                break;
            default:
                throw new IllegalArgumentException("unknown command: " + line);
        }
    }

    public static void main(String[] args) {
        if (args.length != 2) {
            System.err.println("usage: CuratorLock <connect string> <id>");
            System.exit(64);
        }
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(args[0])
                .sessionTimeoutMs(SESSION_MS)
                .connectionTimeoutMs(CONNECTION_MS)
                .retryPolicy(new ExponentialBackoffRetry(50, 10, 1000))
                .build();
        CuratorLock me = new CuratorLock(client, args[1]);
        try {
            client.start();
            if (!client.blockUntilConnected(CONNECTION_MS, TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException("not connected to " + args[0] + " after " + CONNECTION_MS + " ms");
            }
            me.emit("STARTED", null);
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.trim().equals("close")) {
                    break;
                }
                if (!line.trim().isEmpty()) {
                    me.command(line);
                }
            }
            me.emit("CLOSING", null);
            me.worker.shutdownNow();
            client.close();
            me.emit("CLOSED", null);
            System.exit(0);
        } catch (Exception e) {
            me.fail(e);
        }
    }
}
