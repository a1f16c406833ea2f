#!/usr/bin/env python3
"""A loopback TCP proxy in front of a MySQL/MariaDB server that counts what clients cost it.

    mysql_count_proxy.py --target-port PORT --port-file FILE --count-file FILE [--lifetime S]

Listens on a free port of 127.0.0.1, forwards every connection to 127.0.0.1:PORT and writes
its listen port to --port-file. While it runs it keeps --count-file (rewritten atomically after
every change) holding one line:

    connections=N commands=N round_trips=N COM_QUERY=N COM_STMT_PREPARE=N ...

connections: accepted client connections. commands: client command packets after the
handshake (sequence id 0 in the MySQL protocol; the handshake's own packets have ids >= 1), by
command byte. round_trips: the times a client sent a command that expects a reply and then
waited for the server, counted when the reply comes (and written before it is passed on, so a
client that has its answer finds it counted): commands sent together before any server bytes
came back (a prepare and its execute pipelined by mariadb_stmt_execute_direct) count once,
commands without a reply (COM_STMT_CLOSE, COM_QUIT) count none, and nor does a command the
client did not wait for: it said goodbye (COM_QUIT) or hung up before the reply came, or
never read the reply (a last COMMIT sent on the way out), which its kernel tells by resetting
the connection when it closes it with the reply unread. closed: client connections that ended
(the counts are final for a client once its connection is closed). Plain TCP only (no TLS: the
packets must be readable).

With --hold-lone-greeting S, a connection accepted while no other waits in its set-up has the
server's first bytes (its greeting, with which the handshake starts) held back until another
connection is accepted, or S seconds passed: side_by_side counts the connections accepted while
another waited so. A client that opens two connections at once (threads) sees no delay and
counts one; one that opens the second after the first's handshake waits S seconds and counts
none.

Python 3 standard library only; exits by itself after --lifetime seconds (default 240).
"""
import argparse
import os
import selectors
import socket
import time

LOOPBACK = "127.0.0.1"
NAMES = {0x01: "COM_QUIT", 0x02: "COM_INIT_DB", 0x03: "COM_QUERY", 0x0E: "COM_PING",
         0x16: "COM_STMT_PREPARE", 0x17: "COM_STMT_EXECUTE", 0x18: "COM_STMT_SEND_LONG_DATA",
         0x19: "COM_STMT_CLOSE", 0x1A: "COM_STMT_RESET", 0x1F: "COM_RESET_CONNECTION"}
NO_REPLY = {0x01, 0x18, 0x19}


class Counts:
    def __init__(self, path):
        self.path = path
        self.connections = 0
        self.closed = 0
        self.commands = 0
        self.round_trips = 0
        self.side_by_side = 0
        self.by_name = {}

    def write(self):
        parts = [f"connections={self.connections}", f"closed={self.closed}", f"commands={self.commands}",
                 f"round_trips={self.round_trips}", f"side_by_side={self.side_by_side}"]
        parts += [f"{k}={v}" for k, v in sorted(self.by_name.items())]
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.write(" ".join(parts) + "\n")
        os.replace(tmp, self.path)


class Pair:
    def __init__(self, client, upstream):
        self.client = client
        self.upstream = upstream
        self.buffer = b""       # client bytes not yet parsed into whole packet headers
        self.skip = 0           # payload bytes of the current packet still to pass over
        self.awaiting = False   # a reply-expecting command was sent and no server byte came back yet
        self.counted = False    # the last reply was counted and the client sent no command after it
        self.ended = False
        self.held = None        # server bytes held back (--hold-lone-greeting), or None
        self.hold_until = 0.0

    def client_bytes(self, data, counts):
        self.buffer += data
        changed = False
        while True:
            if self.skip:
                n = min(self.skip, len(self.buffer))
                self.buffer = self.buffer[n:]
                self.skip -= n
                if self.skip:
                    break
            if len(self.buffer) < 5:
                break
            length = int.from_bytes(self.buffer[0:3], "little")
            seq = self.buffer[3]
            if seq == 0 and length > 0:
                cmd = self.buffer[4]
                counts.commands += 1
                name = NAMES.get(cmd, f"COM_0x{cmd:02x}")
                counts.by_name[name] = counts.by_name.get(name, 0) + 1
                if cmd not in NO_REPLY:
                    self.awaiting = True
                    self.counted = False
                elif cmd == 0x01:
                    self.awaiting = False  # a goodbye: what it sent last was not waited for
                changed = True
            self.buffer = self.buffer[4:]
            self.skip = length
        return changed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target-port", type=int, required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--count-file", required=True)
    ap.add_argument("--lifetime", type=float, default=240)
    ap.add_argument("--hold-lone-greeting", type=float, default=0)
    args = ap.parse_args()
    holding = []  # the pairs whose server bytes are held back

    def release(pair):
        if pair.held is not None:
            try:
                pair.client.sendall(pair.held)
            except OSError:
                pass
        pair.held = None
        if pair in holding:
            holding.remove(pair)

    counts = Counts(args.count_file)
    counts.write()
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((LOOPBACK, 0))
    listener.listen(64)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(listener.getsockname()[1]) + "\n")
    os.replace(tmp, args.port_file)

    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    deadline = time.monotonic() + args.lifetime
    while time.monotonic() < deadline:
        now = time.monotonic()
        for pair in [p for p in holding if p.hold_until <= now]:
            release(pair)
        for key, _ in sel.select(timeout=0.05 if holding else 0.5):
            if key.data is None:
                client, _ = listener.accept()
                upstream = socket.create_connection((LOOPBACK, args.target_port))
                for s in (client, upstream):
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                pair = Pair(client, upstream)
                if holding:
                    counts.side_by_side += 1
                    for other in list(holding):
                        release(other)
                elif args.hold_lone_greeting > 0:
                    pair.held = b""
                    pair.hold_until = time.monotonic() + args.hold_lone_greeting
                    holding.append(pair)
                sel.register(client, selectors.EVENT_READ, (pair, True))
                sel.register(upstream, selectors.EVENT_READ, (pair, False))
                counts.connections += 1
                counts.write()
                continue
            pair, from_client = key.data
            src = pair.client if from_client else pair.upstream
            dst = pair.upstream if from_client else pair.client
            try:
                data = src.recv(65536)
            except ConnectionResetError:
                # The client closed its end with a reply unread: it did not wait for it.
                if from_client and pair.counted:
                    counts.round_trips -= 1
                    pair.counted = False
                data = b""
            except OSError:
                data = b""
            if not data:
                release(pair)
                if not pair.ended:
                    pair.ended = True
                    counts.closed += 1
                    counts.write()
                for s in (pair.client, pair.upstream):
                    try:
                        sel.unregister(s)
                    except (KeyError, ValueError):
                        pass
                    s.close()
                continue
            if from_client:
                if pair.client_bytes(data, counts):
                    counts.write()
            elif pair.awaiting:
                counts.round_trips += 1
                pair.awaiting = False
                pair.counted = True
                counts.write()
            if not from_client and pair.held is not None:
                pair.held += data
                continue
            try:
                dst.sendall(data)
            except OSError:
                pass


if __name__ == "__main__":
    main()
