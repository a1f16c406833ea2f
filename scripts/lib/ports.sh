# shellcheck shell=bash
# free_port: prints a TCP port on 127.0.0.1 that nothing listens on, for a server about to start.
#
# The port is checked free and then closed, so it must be one that nobody else takes meanwhile:
# it is picked below the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range).
# A port from that range (bind to port 0) is the kind the kernel also hands every outgoing
# connection: with tests connecting to the servers hundreds of times a second, one of them can
# take it as its local port before the server binds it, and the server then fails to start
# ("address in use"). Nothing takes a port below the range without asking for it by number.
free_port() {
  python3 - <<'PY'
import random, socket, sys
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
first = 10000 if low > 11000 else 1024
for _ in range(200):
    port = random.randrange(first, low)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))  # no SO_REUSEADDR: a port in TIME_WAIT counts as taken
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    sys.exit(0)
sys.exit("free_port: no free port below " + str(low))
PY
}
