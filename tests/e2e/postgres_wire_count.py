#!/usr/bin/env python3
"""A counting proxy for the PostgreSQL wire protocol, loopback only.

    postgres_wire_count.py --target-port PORT --port-file FILE --log FILE [--lifetime SECONDS]

Listens on a free port of 127.0.0.1, forwards every connection to 127.0.0.1:PORT and, when a
connection ends, appends one JSON line about it to --log:

  {"startup": {...}, "round_trips": N, "queries": [...], "named": [...], "bound": [...], "messages": "..."}

  startup     the parameters of the StartupMessage (user, database, options, application_name)
  round_trips the client's turns after the server first said ReadyForQuery: each time the
              client sends after the server has sent, one more, except a turn that only says
              Terminate (nothing is waited for). Pipelined statements sent together are one.
  queries     the SQL text of every simple Query ('Q') and Parse ('P') message, in order
  named       "NAME<tab>SQL" of every Parse that names its statement (a prepared statement)
  bound       the statement name of every Bind that runs a named statement, in order
  messages    the type bytes the client sent after the handshake, in order ("P B D E S ...")
  cancel      true for a CancelRequest connection
  accepted    when the proxy accepted the connection, and
  ready_at    when the server first said ReadyForQuery (set-up done): seconds on one monotonic
              clock, so a test can tell whether two connections' set-ups overlapped
  turns       [sent, answered] of each client turn after the set-up, on the same clock (answered:
              the server's first message after it, null if none): whether the statements of two
              connections travelled in the same round trip

It lets tests count what one `dblock run` costs the server (connections, statements, round
trips) without reading server-wide statistics other tests disturb. Plain connections only: the
test's DSN says sslmode=disable (an SSLRequest is still forwarded and its one-byte answer
skipped). It exits by itself after --lifetime seconds (default 240). Standard library only.
"""
import argparse
import json
import os
import signal
import socket
import struct
import sys
import threading
import time

LOOPBACK = "127.0.0.1"
SSL_REQUEST, GSS_REQUEST, CANCEL_REQUEST = 80877103, 80877104, 80877102


class Conn:
    def __init__(self, log, log_lock):
        self.log, self.log_lock = log, log_lock
        self.lock = threading.Lock()
        self.client_buf = b""
        self.server_buf = b""
        self.startup_done = False      # the client's untyped startup packets are over
        self.server_skip = 0           # one-byte answers to SSL/GSS requests still to skip
        self.ready = False             # the server said ReadyForQuery at least once
        self.last = "server"           # who sent last
        self.burst = []                # message types of the client's current turn
        self.bursts = []
        self.startup = {}
        self.queries = []
        self.named = []
        self.bound = []
        self.messages = []
        self.cancel = False
        self.closed = 0
        self.accepted = time.monotonic()
        self.ready_at = None
        self.turns = []

    # Client bytes: untyped startup packets first, then typed messages.
    def from_client(self, data):
        with self.lock:
            self.client_buf += data
            while True:
                if not self.startup_done:
                    if len(self.client_buf) < 8:
                        return
                    (n, code) = struct.unpack("!II", self.client_buf[:8])
                    if len(self.client_buf) < n:
                        return
                    body, self.client_buf = self.client_buf[8:n], self.client_buf[n:]
                    if code in (SSL_REQUEST, GSS_REQUEST):
                        self.server_skip += 1
                    elif code == CANCEL_REQUEST:
                        self.cancel = True
                        self.startup_done = True
                    else:
                        parts = body.split(b"\0")
                        self.startup = {parts[i].decode(): parts[i + 1].decode() for i in range(0, len(parts) - 1, 2) if parts[i]}
                        self.startup_done = True
                    continue
                if len(self.client_buf) < 5:
                    return
                kind = chr(self.client_buf[0])
                (n,) = struct.unpack("!I", self.client_buf[1:5])
                if len(self.client_buf) < 1 + n:
                    return
                body, self.client_buf = self.client_buf[5:1 + n], self.client_buf[1 + n:]
                if not self.ready:
                    continue  # authentication
                if self.last != "client":
                    self.burst = []
                    self.bursts.append(self.burst)
                    self.turns.append([time.monotonic(), None])
                    self.last = "client"
                self.burst.append(kind)
                self.messages.append(kind)
                if kind == "Q":
                    self.queries.append(body.rstrip(b"\0").decode(errors="replace"))
                elif kind == "P":
                    name_end = body.index(b"\0")
                    text_end = body.index(b"\0", name_end + 1)
                    text = body[name_end + 1:text_end].decode(errors="replace")
                    self.queries.append(text)
                    if name_end > 0:
                        self.named.append(body[:name_end].decode(errors="replace") + "\t" + text)
                elif kind == "B":
                    portal_end = body.index(b"\0")
                    name = body[portal_end + 1:body.index(b"\0", portal_end + 1)]
                    if name:
                        self.bound.append(name.decode(errors="replace"))

    def from_server(self, data):
        with self.lock:
            self.server_buf += data
            while True:
                if self.server_skip and self.server_buf:
                    self.server_skip -= 1
                    self.server_buf = self.server_buf[1:]
                    continue
                if len(self.server_buf) < 5:
                    return
                kind = chr(self.server_buf[0])
                (n,) = struct.unpack("!I", self.server_buf[1:5])
                if len(self.server_buf) < 1 + n:
                    return
                self.server_buf = self.server_buf[1 + n:]
                if kind == "Z":
                    if not self.ready:
                        self.ready_at = time.monotonic()
                    self.ready = True
                if self.ready and kind != "A":  # a notification is no answer to anything
                    if self.last == "client" and self.turns:
                        self.turns[-1][1] = time.monotonic()
                    self.last = "server"

    def finish(self):
        with self.lock:
            self.closed += 1
            if self.closed != 2:
                return
            turns = [b for b in self.bursts if any(k != "X" for k in b)]
            line = json.dumps({"startup": self.startup, "round_trips": len(turns), "queries": self.queries,
                               "named": self.named, "bound": self.bound,
                               "messages": " ".join(self.messages), "cancel": self.cancel,
                               "accepted": self.accepted, "ready_at": self.ready_at, "turns": self.turns})
        with self.log_lock:
            with open(self.log, "a") as f:
                f.write(line + "\n")


def pump(src, dst, feed, conn):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            feed(data)
            dst.sendall(data)
    except OSError:
        pass
    for s in (dst, src):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    conn.finish()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target-port", type=int, required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--lifetime", type=float, default=240)
    args = ap.parse_args()
    signal.signal(signal.SIGALRM, lambda *_: os._exit(0))
    signal.alarm(int(args.lifetime))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((LOOPBACK, 0))
    listener.listen(128)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(listener.getsockname()[1]))
    os.rename(tmp, args.port_file)
    log_lock = threading.Lock()
    while True:
        client, _ = listener.accept()
        upstream = socket.create_connection((LOOPBACK, args.target_port))
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = Conn(args.log, log_lock)
        threading.Thread(target=pump, args=(client, upstream, conn.from_client, conn), daemon=True).start()
        threading.Thread(target=pump, args=(upstream, client, conn.from_server, conn), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
