#!/usr/bin/env bash
# scripts/bench/delay_proxy.py, the bench's distance (README, Benchmarks): through it, 40
# connections at once each echo 300 KB sent in uneven pieces back byte for byte (nothing
# reordered, lost or mixed between connections); a round trip (21 on a lone connection once the
# 40 are done) takes at least twice the one-way delay, and a server that speaks first reaches
# the client no sooner than two round trips after its connect (the TCP handshake is one);
# SIGTERM ends the proxy at once. scripts/bench/proxy_rtt.py times round trips through it.
source "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || skip_or_fail "no python3"
out=$(timeout 120 python3 - "$DBLOCK_SOURCE_DIR/scripts/bench/delay_proxy.py" <<'PY'
import os, random, socket, subprocess, sys, threading, time
DELAY_MS = 2.0
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(128)
greet = {"on": False}
def serve(c):
    if greet["on"]:
        c.sendall(b"hello")
    while True:
        d = c.recv(65536)
        if not d:
            c.shutdown(socket.SHUT_WR)
            return
        c.sendall(d)
def acceptor():
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
threading.Thread(target=acceptor, daemon=True).start()
p = subprocess.Popen([sys.executable, sys.argv[1], "--target-port", str(ls.getsockname()[1]),
                      "--delay-ms", str(DELAY_MS), "--lifetime", "100"], stdout=subprocess.PIPE)
port = int(p.stdout.readline())
bad, rtts = [], []
def client(n):
    rnd = random.Random(n)
    s = socket.create_connection(("127.0.0.1", port))
    data = rnd.randbytes(300_000)
    def w():
        i = 0
        while i < len(data):
            k = rnd.randint(1, 20000)
            s.sendall(data[i:i + k])
            i += k
        s.shutdown(socket.SHUT_WR)
    th = threading.Thread(target=w)
    th.start()
    got = bytearray()
    while True:
        d = s.recv(65536)
        if not d:
            break
        got += d
    th.join()
    if bytes(got) != data:
        bad.append(n)
ts = [threading.Thread(target=client, args=(i,)) for i in range(40)]
[t.start() for t in ts]
[t.join() for t in ts]
# The round trips on a connection of their own once the 40 are done: measured among 40 busy
# ones they told the machine's load (a median of 40 ms at load 14), not the proxy's delay.
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for _ in range(21):
    t = time.monotonic()
    s.sendall(b"x")
    if s.recv(1) != b"x":
        bad.append("pings")
    rtts.append((time.monotonic() - t) * 1000)
s.close()
greet["on"] = True
t = time.monotonic()
s = socket.create_connection(("127.0.0.1", port))
first = s.recv(5)
greeting_ms = (time.monotonic() - t) * 1000
s.close()
t = time.monotonic()
p.terminate()
p.wait(10)
rtts.sort()
print(len(bad), "%.2f" % rtts[0], "%.2f" % rtts[len(rtts) // 2], "%.2f" % greeting_ms,
      "ok" if first == b"hello" else "bad", "%.2f" % (time.monotonic() - t))
PY
)
read -r bad rtt_min rtt_median greeting first stop_s <<<"$out"
echo "      mismatched connections=$bad rtt min=$rtt_min median=$rtt_median ms greeting=$greeting ms stop=$stop_s s"
assert_eq "every connection's bytes came back as sent" 0 "$bad"
check "no round trip under 4 ms at 2 ms each way ($rtt_min)" awk -v v="$rtt_min" 'BEGIN { exit !(v >= 4) }'
# The upper bounds are loose: the machine may be loaded.
check "the median round trip is near 4 ms ($rtt_median)" awk -v v="$rtt_median" 'BEGIN { exit !(v < 40) }'
assert_eq "the server's greeting came through" ok "$first"
check "the greeting came two round trips after the connect, no sooner ($greeting ms)" \
  awk -v v="$greeting" 'BEGIN { exit !(v >= 8 && v < 100) }'
check "SIGTERM ends the proxy at once ($stop_s s)" awk -v v="$stop_s" 'BEGIN { exit !(v < 2) }'

# proxy_rtt.py, the bench's measure of the proxy itself: 20 round trips at 4 ms, none under it.
rtt_out=$(timeout 60 python3 "$DBLOCK_SOURCE_DIR/scripts/bench/proxy_rtt.py" --rtt-ms 4 --count 20)
assert_eq "proxy_rtt.py printed one round trip per line" 20 "$(grep -cE '^[0-9]+\.[0-9]{3}$' <<<"$rtt_out")"
check "no round trip it timed was under 4 ms ($(sort -n <<<"$rtt_out" | head -n 1))" \
  awk '$1 < 4 { bad = 1 } END { exit bad }' <<<"$rtt_out"
finish
