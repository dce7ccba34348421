#!/usr/bin/env python3
"""Delete -> notification on the wire, from a packet capture of a hand-off run.

Splits a hand-off's "delete -> the next holder's callback" into the server's
part (the delete request on the wire -> the notification on the wire) and
the clients' part (the rest), for every side of `zkelect-bench handoff`, and
says in which order the server wrote the notifications of one delete.

    tcpdump -i lo -s 0 -w run.pcap "tcp port PORT" &    # PORT: the server's
    zkelect-bench handoff --connect 127.0.0.1:PORT --waiters 300 ...
    python3 bench/tools/zk_wire.py run.pcap PORT

A delete is a timed round's when no other delete of its side is within 5 ms
of it (the runs' set-up and tear-down delete in bursts). Sides are told
apart by path: `/floor/d-` (and with `--hops` the two zookeeper-async floors,
`a-` and `b-`), `/zookeeper-client/`, `/zkelect/`. For zkelect,
the next holder S of a round is the session that sends the next round's
delete; the releasing session R and the waiter T behind S are notified too
(R's own-node watch, T's farther-node watch), and the order of the three
notifications is counted.

Standard library only; IPv4 over a loopback capture (Ethernet framing).
"""
import collections
import statistics
import struct
import sys

OPS = {2: "delete"}
NODE_DELETED = 2


def frames(capture, port):
    """Yields (time, to_server, client_port, xid, op_or_event, path)."""
    with open(capture, "rb") as f:
        header = f.read(24)
        magic = struct.unpack("<I", header[:4])[0]
        if magic not in (0xA1B2C3D4, 0xA1B23C4D):
            sys.exit(f"{capture}: not a little-endian pcap file")
        scale = 1e9 if magic == 0xA1B23C4D else 1e6
        streams = collections.defaultdict(bytearray)
        while True:
            record = f.read(16)
            if len(record) < 16:
                return
            sec, frac, length, _ = struct.unpack("<IIII", record)
            data = f.read(length)
            t = sec + frac / scale
            ip = data[14:]
            if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
                continue
            tcp = ip[(ip[0] & 15) * 4:]
            sport, dport = struct.unpack(">HH", tcp[:4])
            payload = tcp[(tcp[12] >> 4) * 4:]
            if not payload or port not in (sport, dport):
                continue
            buf = streams[(sport, dport)]
            buf += payload
            while len(buf) >= 4:
                (n,) = struct.unpack(">i", buf[:4])
                if len(buf) < 4 + n:
                    break
                body = bytes(buf[4:4 + n])
                del buf[:4 + n]
                if dport == port and len(body) >= 12:
                    xid, op = struct.unpack(">ii", body[:8])
                    if op in OPS:
                        (pl,) = struct.unpack(">i", body[8:12])
                        yield t, True, sport, xid, op, body[12:12 + pl].decode(errors="replace")
                elif sport == port and len(body) >= 28:
                    xid, _zxid, _err = struct.unpack(">iqi", body[:16])
                    if xid == -1:
                        event, _state, pl = struct.unpack(">iii", body[16:28])
                        yield t, False, dport, xid, event, body[28:28 + pl].decode(errors="replace")


def side(path):
    # `--hops` adds two floors over zookeeper-async: `a-` (one watch) and
    # `b-` (the node watched as a two-watch hand-off's: three sessions told).
    for prefix, name in (("/floor/d-", "floor"), ("/floor/a-", "floor over zookeeper-async"),
                         ("/floor/b-", "floor over zookeeper-async, three told")):
        if prefix in path:
            return name
    for name in ("zookeeper-client", "zkelect"):
        if f"/{name}/" in path:
            return name
    return None


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    deletes, notices = [], collections.defaultdict(list)
    for t, to_server, client, _xid, what, path in frames(sys.argv[1], int(sys.argv[2])):
        if to_server:
            deletes.append((t, client, path))
        elif what == NODE_DELETED:
            notices[path].append((t, client))
    by_side = collections.defaultdict(list)
    for d in deletes:
        if side(d[2]):
            by_side[side(d[2])].append(d)
    for name, ds in sorted(by_side.items()):
        rounds = [d for i, d in enumerate(ds)
                  if all(abs(d[0] - o[0]) > 0.005 for o in ds[max(0, i - 1):i] + ds[i + 1:i + 2])]
        gaps, to_s, order = [], [], collections.Counter()
        for i, (t, r, path) in enumerate(rounds):
            told = sorted(n for n in notices.get(path, []) if n[0] >= t)
            if not told:
                continue
            gaps.append((told[0][0] - t) * 1e6)
            if name == "zkelect" and i + 1 < len(rounds) and len(told) >= 3:
                s = rounds[i + 1][1]
                clients = [c for _, c in told]
                if s in clients:
                    before = clients[:clients.index(s)]
                    to_s.append((told[clients.index(s)][0] - t) * 1e6)
                    order[" ".join("R" if c == r else "T" for c in before) or "S first"] += 1
        if not gaps:
            continue
        gaps.sort()
        print(f"{name}: {len(gaps)} rounds, delete -> first notification on the wire: "
              f"median {statistics.median(gaps):.1f} µs, p10 {gaps[len(gaps) // 10]:.1f}, "
              f"p90 {gaps[len(gaps) * 9 // 10]:.1f}")
        if to_s:
            print(f"  zkelect, delete -> the next holder S's notification: "
                  f"median {statistics.median(to_s):.1f} µs ({len(to_s)} rounds)")
        if order:
            print("  zkelect, who was notified before the next holder S: "
                  + ", ".join(f"{k}: {v}" for k, v in order.most_common()))


if __name__ == "__main__":
    main()
