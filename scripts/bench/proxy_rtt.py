#!/usr/bin/env python3
"""The round trip delay_proxy.py really gives, for the bench's distance section.

    proxy_rtt.py --rtt-ms MS [--count N]

Starts an echo server on 127.0.0.1 and delay_proxy.py (beside this file) in front of it at a
one-way delay of MS / 2, then times N one-byte round trips through the proxy on one connection
(TCP_NODELAY, 3 ms apart; the first, which waits for the proxy's own connect, not counted) and
prints each in ms, one per line. The echo's own time is in the figure too (about 0.05-0.1 ms
without the proxy on an idle machine). Python 3 standard library only; loopback only.
"""
import argparse
import os
import socket
import subprocess
import sys
import threading
import time


def main():
    ap = argparse.ArgumentParser(description="Times round trips through delay_proxy.py (see the module docstring).")
    ap.add_argument("--rtt-ms", type=float, required=True)
    ap.add_argument("--count", type=int, default=200)
    args = ap.parse_args()
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def echo():
        c, _ = server.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while data := c.recv(64):
            c.sendall(data)

    threading.Thread(target=echo, daemon=True).start()
    proxy = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "delay_proxy.py"),
                              "--target-port", str(server.getsockname()[1]), "--delay-ms", str(args.rtt_ms / 2),
                              "--lifetime", "600"], stdout=subprocess.PIPE, text=True)
    try:
        c = socket.create_connection(("127.0.0.1", int(proxy.stdout.readline())))
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(args.count + 1):
            t = time.monotonic()
            c.sendall(b"x")
            if c.recv(1) != b"x":
                sys.exit("proxy_rtt.py: the echo did not come back")
            if i:
                print("%.3f" % ((time.monotonic() - t) * 1000))
            time.sleep(0.003)
    finally:
        proxy.terminate()
        proxy.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
