#!/usr/bin/env python3
"""A freezable TCP proxy for the fault suite, loopback only.

    proxy.py --target-port PORT [--port-file FILE] [--state-file FILE] [--lifetime SECONDS]

Listens on a free port of 127.0.0.1, forwards every connection to 127.0.0.1:PORT, and prints
its listen port on stdout (and writes it to --port-file, atomically). It neither listens on nor
connects to any other address: a test must never reach beyond this machine.

Control, by signal to its pid (tests/faults/lib.sh wraps these):
  SIGUSR1  freeze: stop reading, writing and accepting, and close nothing. Bytes in flight stay
           unread in the kernel's socket buffers and the kernel still ACKs and answers TCP
           keepalives, so to both ends the path looks alive but silent: a network that went
           dark without a RST. Only an idle limit on the server (or the client's own
           statement timeout) can notice.
  SIGUSR2  thaw: forward again, including what queued up while frozen.
  SIGHUP   reset: abort every open connection with a RST (SO_LINGER 0), keep listening.
  SIGTERM  exit.
After each change of state it rewrites --state-file with one line
  `running|frozen NS accepted=N open=M`   (NS: wall clock in ns when the state took effect),
so a test knows the freeze is in effect, and when, before it measures anything.

It exits by itself after --lifetime seconds (default 240), so a test that dies cannot leave it
behind. Python 3 standard library only.
"""
import argparse
import os
import select
import signal
import socket
import struct
import sys
import time

LOOPBACK = "127.0.0.1"
CHUNK = 65536


def loopback_only(host):
    # The one guard in front of every bind and connect.
    if host != LOOPBACK:
        raise SystemExit(f"proxy.py: refusing {host}: loopback ({LOOPBACK}) only")
    return host


class Pair:
    """One proxied connection: side 0 is the client, side 1 the upstream server."""

    def __init__(self, client, upstream):
        self.socks = [client, upstream]
        self.pending = [b"", b""]  # bytes waiting to be written to socks[i]
        self.eof = [False, False]  # socks[i] sent FIN (read returned b"")
        self.shut = [False, False]  # write side of socks[i] shut down after its peer's FIN
        self.closed = False

    def close(self, reset=False):
        if self.closed:
            return
        self.closed = True
        for s in self.socks:
            if reset:
                try:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                except OSError:
                    pass
            s.close()

    def wants_read(self, i):
        # Back-pressure: read from one side only when the other side's queue is drained.
        return not self.eof[i] and not self.pending[1 - i]

    def on_readable(self, i):
        try:
            data = self.socks[i].recv(CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close(reset=True)
            return
        if data:
            self.pending[1 - i] += data
        else:
            self.eof[i] = True
        self.flush(1 - i)

    def flush(self, i):
        if self.closed:
            return
        if self.pending[i]:
            try:
                sent = self.socks[i].send(self.pending[i])
                self.pending[i] = self.pending[i][sent:]
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self.close(reset=True)
                return
        if not self.pending[i] and self.eof[1 - i] and not self.shut[i]:
            self.shut[i] = True
            try:
                self.socks[i].shutdown(socket.SHUT_WR)
            except OSError:
                pass
        if self.shut[0] and self.shut[1]:
            self.close()


class Proxy:
    def __init__(self, target_port, state_file):
        self.target = (loopback_only(LOOPBACK), target_port)
        self.state_file = state_file
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((loopback_only(LOOPBACK), 0))
        self.listener.listen(64)
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.pairs = []
        self.accepted = 0
        self.frozen = False
        self.requests = []  # signals seen, applied in order by the loop
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.wake_w.setblocking(False)
        signal.set_wakeup_fd(self.wake_w.fileno(), warn_on_full_buffer=False)
        for sig in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda s, _f: self.requests.append(s))

    def write_state(self):
        if not self.state_file:
            return
        self.pairs = [p for p in self.pairs if not p.closed]
        line = (f"{'frozen' if self.frozen else 'running'} {time.time_ns()} "
                f"accepted={self.accepted} open={len(self.pairs)}\n")
        tmp = self.state_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(line)
        os.replace(tmp, self.state_file)

    def accept(self):
        try:
            client, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        upstream.settimeout(5)
        try:
            upstream.connect((loopback_only(self.target[0]), self.target[1]))
        except OSError as e:
            print(f"proxy.py: cannot reach {self.target[0]}:{self.target[1]}: {e}", file=sys.stderr)
            upstream.close()
            client.close()
            return
        for s in (client, upstream):
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.pairs.append(Pair(client, upstream))
        self.accepted += 1
        self.write_state()

    def apply(self, sig):
        if sig == signal.SIGUSR1:
            self.frozen = True
        elif sig == signal.SIGUSR2:
            self.frozen = False
        elif sig == signal.SIGHUP:
            for p in self.pairs:
                p.close(reset=True)
        else:
            return False
        print(f"proxy.py: {signal.Signals(sig).name}: now {'frozen' if self.frozen else 'running'}", file=sys.stderr)
        self.write_state()
        return True

    def run(self, lifetime):
        deadline = time.monotonic() + lifetime
        self.write_state()
        while True:
            while self.requests:
                if not self.apply(self.requests.pop(0)):
                    return 0
            left = deadline - time.monotonic()
            if left <= 0:
                print("proxy.py: lifetime over, exiting", file=sys.stderr)
                return 0
            self.pairs = [p for p in self.pairs if not p.closed]
            readers, writers, owner = [self.wake_r], [], {}
            if not self.frozen:
                readers.append(self.listener)
                for p in self.pairs:
                    for i, s in enumerate(p.socks):
                        owner[s] = (p, i)
                        if p.wants_read(i):
                            readers.append(s)
                        if p.pending[i]:
                            writers.append(s)
            try:
                r, w, _ = select.select(readers, writers, [], min(left, 1.0))
            except InterruptedError:
                continue
            if self.wake_r in r:
                try:
                    while self.wake_r.recv(512):
                        pass
                except (BlockingIOError, InterruptedError):
                    pass
            # A signal that arrived meanwhile is applied before anything more is forwarded,
            # so nothing moves once the state file says frozen.
            for s in w:
                if self.requests:
                    break
                p, i = owner[s]
                p.flush(i)
            for s in r:
                if self.requests:
                    break
                if s is self.listener:
                    self.accept()
                elif s in owner and not owner[s][0].closed:
                    p, i = owner[s]
                    p.on_readable(i)


def main():
    ap = argparse.ArgumentParser(description="Freezable loopback TCP proxy (see the module docstring).")
    ap.add_argument("--target-port", type=int, required=True)
    ap.add_argument("--port-file")
    ap.add_argument("--state-file")
    ap.add_argument("--lifetime", type=float, default=240.0)
    args = ap.parse_args()
    if not 0 < args.target_port < 65536:
        ap.error("--target-port must be 1..65535")
    proxy = Proxy(args.target_port, args.state_file)
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{proxy.port}\n")
        os.replace(tmp, args.port_file)
    print(proxy.port, flush=True)
    return proxy.run(args.lifetime)


if __name__ == "__main__":
    sys.exit(main())
