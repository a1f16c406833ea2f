#!/usr/bin/env python3
"""A TCP proxy on 127.0.0.1 that puts a fixed distance between a client and a test server.

    delay_proxy.py --target-port PORT --delay-ms MS [--port-file FILE] [--lifetime SECONDS]

Listens on a free port of 127.0.0.1, forwards every connection to 127.0.0.1:PORT, and prints
its listen port on stdout (and writes it to --port-file, atomically). Every byte is held MS
milliseconds in each direction (MS may be fractional; 5 gives a 10 ms round trip) before it is
passed on, in the order it came: each direction is one first-in first-out queue, so nothing is
reordered, and a FIN is passed on MS after the bytes before it. The TCP handshake is a round trip
too: the server sees the connection 3 x MS after the client's connect (the SYN, the SYN-ACK and
the ACK), and the client's first bytes reach it no sooner, so a server that speaks first (MySQL's
greeting) reaches the client two round trips after its connect, as over a real network. A reset
or error on either side ends the connection at once. Many connections at a time (up to about 500:
select(2) is used for its microsecond timeouts, where epoll and poll round up to milliseconds);
each direction reads at most 1 MiB ahead of its writes.

Its own time is kept out of the delay as far as it can: a byte is held MS from when the kernel
queued it on the proxy's socket (SO_TIMESTAMPNS), not from when the proxy got round to reading
it, and the proxy's timers fire without the kernel's default 50 us of slack (PR_SET_TIMERSLACK).
What is left, the proxy's wake-ups and its loop, adds about 0.1 ms to each direction on an idle
machine; the bench's distance section measures the round trip it really gives and prints it.

It neither listens on nor connects to any other address: the bench must never reach beyond this
machine. It exits on SIGTERM or by itself after --lifetime seconds (default 3600), so a bench that
dies cannot leave it behind. Python 3 standard library only.
"""
import argparse
import collections
import ctypes
import ctypes.util
import os
import select
import signal
import socket
import struct
import sys
import time

LOOPBACK = "127.0.0.1"
CHUNK = 65536
AHEAD = 1 << 20  # bytes a direction may hold before it stops reading
MAX_FDS = 1000   # select(2)'s FD_SETSIZE is 1024
# The kernel's receive time of the bytes a recvmsg returns (a struct timespec of the wall clock).
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
STAMP = struct.Struct("@qq")
STAMP_SPACE = socket.CMSG_SPACE(STAMP.size)


def stamped(sock):
    """Asks the kernel to stamp what sock receives (read by Proxy.read); quietly without."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        pass


def fine_timers():
    """A timer slack of 1 ns (Linux's PR_SET_TIMERSLACK, 29): select(2)'s timeout then ends when
    asked, not up to 50 us later in each direction. Best effort: a proxy without it is as correct."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(29, ctypes.c_ulong(1), 0, 0, 0)
    except (OSError, AttributeError):
        pass


class Direction:
    """Bytes from src to dst: a queue of (due, bytes or None for the FIN), then an output buffer."""

    def __init__(self):
        self.queue = collections.deque()
        self.queued = 0
        self.out = b""
        self.fin = False    # the FIN is due: shut dst's write side once out is written
        self.eof = False    # src sent its FIN (nothing more to read)
        self.shut = False


class Pair:
    """One proxied connection; direction 0 is client -> server, 1 is server -> client."""

    def __init__(self, client, connect_at):
        self.client = client
        self.server = None
        self.connect_at = connect_at
        self.dirs = [Direction(), Direction()]
        self.closed = False

    def socks(self):
        return [self.client, self.server]

    def close(self):
        if not self.closed:
            self.closed = True
            for s in (self.client, self.server):
                if s is not None:
                    s.close()


class Proxy:
    def __init__(self, target_port, delay):
        self.target = (LOOPBACK, target_port)
        self.delay = delay
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((LOOPBACK, 0))
        self.listener.listen(256)
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.pairs = []
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)

    def on_signal(self, _sig, _frame):
        # An exception, not a flag: select(2) is retried after a handler returns (PEP 475).
        raise SystemExit(0)

    def accept(self, now):
        try:
            client, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        client.setblocking(False)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        stamped(client)
        self.pairs.append(Pair(client, now + 3 * self.delay))

    def connect(self, p):
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.settimeout(5)
        try:
            server.connect(self.target)
        except OSError as e:
            print(f"delay_proxy.py: cannot reach {self.target[0]}:{self.target[1]}: {e}", file=sys.stderr)
            server.close()
            p.close()
            return
        server.setblocking(False)
        server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        stamped(server)
        p.server = server

    def read(self, p, i):
        d = p.dirs[i]
        try:
            data, ancillary, _, _ = p.socks()[i].recvmsg(CHUNK, STAMP_SPACE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            p.close()
            return
        # How long ago the kernel queued these bytes (the last of them), by the wall clock the
        # stamp is in; bounded, so that a clock stepped meanwhile can neither hold them much
        # longer nor pass them on early by more than that bound's worth of the delay. Against
        # clocks read here, not the loop's `now`, which came before this read.
        at, waited = time.monotonic(), 0.0
        for level, kind, stamp in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(stamp) >= STAMP.size:
                sec, nsec = STAMP.unpack_from(stamp)
                waited = min(max(time.time() - (sec + nsec / 1e9), 0.0), 0.002, self.delay)
        d.queue.append((at - waited + self.delay, data or None))
        if data:
            d.queued += len(data)
        else:
            d.eof = True

    def flush(self, p, i, now):
        """Moves what is due to the output buffer and writes as much of it as dst takes."""
        d = p.dirs[i]
        dst = p.socks()[1 - i]
        if dst is None:
            return
        while d.queue and d.queue[0][0] <= now and not d.fin:
            _, data = d.queue.popleft()
            if data is None:
                d.fin = True
            else:
                d.out += data
                d.queued -= len(data)
        if d.out:
            try:
                sent = dst.send(d.out)
                d.out = d.out[sent:]
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                p.close()
                return
        if d.fin and not d.out and not d.shut:
            d.shut = True
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        if p.dirs[0].shut and p.dirs[1].shut:
            p.close()

    def run(self, lifetime):
        deadline = time.monotonic() + lifetime
        while True:
            now = time.monotonic()
            if now >= deadline:
                print("delay_proxy.py: lifetime over, exiting", file=sys.stderr)
                return 0
            for p in self.pairs:
                if p.server is None and not p.closed and p.connect_at <= now:
                    self.connect(p)
                for i in (0, 1):
                    if not p.closed:
                        self.flush(p, i, now)
            self.pairs = [p for p in self.pairs if not p.closed]
            readers, writers, owner = [], [], {}
            if 1 + 2 * len(self.pairs) + 2 < MAX_FDS:
                readers.append(self.listener)
            wake = deadline
            for p in self.pairs:
                if p.server is None:
                    wake = min(wake, p.connect_at)
                for i, s in enumerate(p.socks()):
                    if s is None:
                        continue
                    d = p.dirs[i]
                    owner[s] = (p, i)
                    if not d.eof and d.queued < AHEAD:
                        readers.append(s)
                    # dst of direction 1 - i is s.
                    o = p.dirs[1 - i]
                    if o.out:
                        writers.append(s)
                    elif o.queue and not o.fin:
                        wake = min(wake, o.queue[0][0])
            timeout = max(0.0, wake - time.monotonic())
            try:
                r, w, _ = select.select(readers, writers, [], timeout)
            except InterruptedError:
                continue
            now = time.monotonic()
            for s in w:
                p, i = owner[s]
                if not p.closed:
                    self.flush(p, 1 - i, now)
            for s in r:
                if s is self.listener:
                    self.accept(now)
                elif s in owner:
                    p, i = owner[s]
                    if not p.closed:
                        self.read(p, i)
        return 0


def main():
    ap = argparse.ArgumentParser(description="Loopback TCP proxy with a fixed delay each way (see the module docstring).")
    ap.add_argument("--target-port", type=int, required=True)
    ap.add_argument("--delay-ms", type=float, required=True, help="one-way delay in ms (half the round trip)")
    ap.add_argument("--port-file")
    ap.add_argument("--lifetime", type=float, default=3600.0)
    args = ap.parse_args()
    if not 0 < args.target_port < 65536:
        ap.error("--target-port must be 1..65535")
    if not 0 <= args.delay_ms <= 10000:
        ap.error("--delay-ms must be 0..10000")
    fine_timers()
    proxy = Proxy(args.target_port, args.delay_ms / 1000.0)
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{proxy.port}\n")
        os.replace(tmp, args.port_file)
    print(proxy.port, flush=True)
    return proxy.run(args.lifetime)


if __name__ == "__main__":
    sys.exit(main())
