// A foreign contender for zkelect's interop tests (tests/tests/e2e/interop.rs):
// one Apache Curator 5.4 LeaderLatch, run as it is documented, that reports
// its OWN belief of leadership on stdout. Compiled and started by
// tests/src/foreign.rs; not part of any shipped artifact.
//
// Usage: java -cp <dir>:<curator jars> CuratorLatch <connect string> <latch path> <id>
//
// Every stdout line is `<CLOCK_MONOTONIC ns> <KIND> <id> [<detail>]`, flushed
// at once. System.nanoTime() reads CLOCK_MONOTONIC on Linux, the clock the
// Rust tests read, so the stamps compare with theirs.
//   STARTED   the latch is started (its node may not exist yet)
//   NODE      the latch's node, detail = its full path (again if it changes)
//   LEADER    hasLeadership() turned true
//   FOLLOWER  hasLeadership() turned false (also the initial belief)
//   STATE     a connection state change, detail = Curator's name for it
//   CLOSING   asked to close: from here on it no longer acts as leader; the
//             latch deletes its node only after this line
//   CLOSED    latch and client closed; the process exits 0 right after
//   ERROR     something failed, detail = the exception; exits non-zero
// It closes when stdin says `close` or reaches EOF (the test process died).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorLatch {
    // Short enough that a lost process frees its node quickly, long enough
    // for a loaded two-core machine (the test servers allow 400 ms to 10 s).
    private static final int SESSION_MS = 4000;
    private static final int CONNECTION_MS = 15000;

    private final String id;
    private final LeaderLatch latch;
    // Guarded by `this`: what was last reported, and whether reporting stopped.
    private boolean leading = false;
    private boolean closing = false;
    private String node = null;

    private CuratorLatch(CuratorFramework client, String path, String id) {
        this.id = id;
        this.latch = new LeaderLatch(client, path, id);
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

    // Reports the latch's current belief and node if they changed. Called by
    // the listener on every change and by a poller, so that no change is
    // missed whatever thread Curator notifies on.
    private synchronized void report() {
        if (closing) {
            return;
        }
        String path = latch.getOurPath();
        if (path != null && !path.equals(node)) {
            node = path;
            emit("NODE", path);
        }
        boolean now = latch.hasLeadership();
        if (now != leading) {
            leading = now;
            emit(now ? "LEADER" : "FOLLOWER", null);
        }
    }

    private synchronized void beginClose() {
        closing = true;
        emit("CLOSING", null);
    }

    public static void main(String[] args) {
        if (args.length != 3) {
            System.err.println("usage: CuratorLatch <connect string> <latch path> <id>");
            System.exit(64);
        }
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(args[0])
                .sessionTimeoutMs(SESSION_MS)
                .connectionTimeoutMs(CONNECTION_MS)
                // Quick retries: the test servers are local.
                .retryPolicy(new ExponentialBackoffRetry(50, 10, 1000))
                .build();
        CuratorLatch me = new CuratorLatch(client, args[1], args[2]);
        try {
            client.getConnectionStateListenable().addListener(
                    (c, state) -> me.emit("STATE", state.name()));
            client.start();
            if (!client.blockUntilConnected(CONNECTION_MS, TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException("not connected to " + args[0] + " after " + CONNECTION_MS + " ms");
            }
            me.emit("FOLLOWER", null);
            me.latch.addListener(new LeaderLatchListener() {
                @Override
                public void isLeader() {
                    me.report();
                }

                @Override
                public void notLeader() {
                    me.report();
                }
            });
            me.latch.start();
            me.emit("STARTED", null);
            Thread poller = new Thread(() -> {
                while (true) {
                    me.report();
                    try {
                        Thread.sleep(5);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }, "belief-poller");
            poller.setDaemon(true);
            poller.start();

            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.trim().equals("close")) {
                    break;
                }
            }
            me.beginClose();
            poller.interrupt();
            me.latch.close();
            client.close();
            me.emit("CLOSED", null);
            System.exit(0);
        } catch (Exception e) {
            me.emit("ERROR", e.toString().replace('\n', ' '));
            e.printStackTrace();
            System.exit(2);
        }
    }
}
