#!/usr/bin/env python3
"""The project's own adversary: a farm of simulated hosts whose configurations and faults are
drawn at random from a seed, checked by an oracle that does not trust dblock.

    adversary.py [--budget 5m] [--seeds 11,12] [--fresh] [--backends sqlite,mysql,postgres]
                 [--dblock PATH] [--shrink 3m] [--soak] [--keep DIR]
    adversary.py --plan FILE_OR_JSON [--repeat N]      replay one round exactly as drawn
    adversary.py ... --previous PATH [--upgrades 0.25]  also rolling upgrades (below)

A round draws from its seed: 2-6 hosts, each with its own configuration (where its DSN comes
from: -d, DBLOCK_DSN, DBLOCK_DSN_FILE, --dsn-file, a config file, a multi-host DSN, a PgBouncer
in session or transaction mode; strategy and where it is set; table format; --slots; --ttl;
--min-hold; --min-interval; -w; -E; `run` or the README's acquire/renew/release script; a job
that runs dblock again), a few keys the hosts share while disagreeing about them, and faults
at random times (kill -9 of dblock, of its process group, of the job; SIGSTOP/SIGCONT of
dblock or its group; a server session killed; a server restart; a frozen or reset link; a
DBA's transaction holding a key's row; a wall-clock step for one host; a full disk under
SQLite). Every host runs as the user nobody
(when started as root) with a home of its own, and loops: pick a key, run, pause.

The oracle (tests/adversary/adv_job.sh, with flock(2), so the kernel and not a log decides):
no two live process trees hold one slot of a key (a step of the shell pattern whose token is
stale is turned away, as a fenced resource would, and counts as fenced, not as a breach), no two slot counts (or a plain lock and a
semaphore) of a key run at once, tokens never repeat per key and increase per slot; every
dblock ends with a documented exit status (70, an internal error, counts as a failure), and
within the round's grace (no hang); no file appears outside the configured paths (each host's
home, XDG directories and /var/lib/dblock are compared before and after).

Rolling upgrades: with --previous (a dblock of the previous release, built by the suite in
build/previous/, tests/upgrade/build_previous.sh), that share of the fresh rounds becomes a
farm half upgraded: every host has the first host's configuration (the previous release needs
every host of a key to agree, as NEWS says; no nested dblock, pooler or --slots, which it
mishandled on its own), and each runs either version, both present.

A failing round prints its seed, the drawn configuration per host, the timeline of faults and
runs, and the command that replays it; with --shrink it first tries smaller rounds (fewer
hosts, faults and keys, simpler options) that still fail, and prints the smallest.

Server backends use servers of its own (scripts/test-servers.sh start, with a private state
file), so that it may restart and kill them; loopback only. The summary line counts rounds,
runs, starts, faults per kind, refusals per reason and breaches. Exit 0: no breach; 1: a
breach (the report says which round); 2: the harness itself could not run.
"""
import argparse
import collections
import fcntl
import json
import os
import pwd
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
JOB = os.path.join(HERE, "adv_job.sh")
PROXY = os.path.join(SOURCE, "tests", "faults", "proxy.py")
SERVERS = os.path.join(SOURCE, "scripts", "test-servers.sh")

STRATEGIES = {"sqlite": ["lease"], "mysql": ["lease", "advisory", "for-update", "txn-insert"],
              "postgres": ["lease", "advisory", "for-update", "txn-insert"]}
# Exit statuses the man page documents for run, acquire, renew and release (EXIT STATUS), and
# those of the job (0, 143 on SIGTERM) passed on; 128+N is added below. 70 (an internal
# error) is documented but is a defect: it counts as a breach.
DOCUMENTED = {0, 64, 69, 71, 75, 76, 78, 124, 126, 127}
FAULTS_ALL = ["kill_dblock", "kill_group", "kill_job", "stop_dblock", "stop_group", "clock_step"]
FAULTS_SERVER = ["session_kill", "link_freeze", "link_reset", "server_restart", "row_hold"]
FAULTS_SQLITE = ["disk_full"]
# Refusals (exit 78) grouped by what the message names; the first match wins.
REASONS = [
    ("other strategy or table format", r"used another|another --strategy|--table-format|strategy .* held"),
    ("slot count", r"--slots|slot count|semaphore"),
    ("nested: other database", r"other database|another database|DBLOCK_RUN_DATABASE|inside the command"),
    ("pooler", r"pool"),
    ("lease only", r"only with --strategy lease|lease only|supports only the lease strategy"),
    ("ShedLock table: no --min-interval", r"ShedLock's table keeps no last start"),
]


def now():
    return time.time()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_duration(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smh]?)", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text}")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


# ---------------------------------------------------------------- drawing a round

def draw_host(r, backend, keys):
    strategies = STRATEGIES[backend]
    h = {"mode": "shell" if r.random() < 0.15 else "run"}
    sources = ["flag", "env", "file_env", "file_flag", "config"]
    if backend == "postgres":
        sources.append("multihost")
    h["dsn_source"] = r.choice(sources)
    h["pooler"] = None
    if backend == "postgres" and h["dsn_source"] != "multihost" and r.random() < 0.25:
        h["pooler"] = r.choice(["session", "transaction"])
    h["strategy"] = "lease" if h["mode"] == "shell" else r.choice(strategies)
    h["strategy_source"] = r.choice(["flag", "env", "config"])
    h["table_format"] = "shedlock" if r.random() < 0.12 else "dblock"
    h["slots"] = None if h["mode"] == "shell" or r.random() < 0.6 else r.randint(1, 3)
    h["ttl"] = r.choice([3, 4, 6, 10])
    h["min_hold"] = r.choice([0, 0, 0, 0.5, 1.5])
    h["min_interval"] = r.choice([0, 0, 0, 0, 1, 2])
    h["wait"] = r.choice([None, None, 0, 2, 5, 10])
    h["E"] = r.choice([None, None, None, 0, 3])
    h["keys"] = sorted(r.sample(keys, r.randint(1, len(keys))))
    h["job"] = r.choice([[0.1, 0.5], [0.3, 1.5], [1.0, 3.0]])
    h["pause"] = r.choice([[0.0, 0.2], [0.1, 0.8]])
    if h["table_format"] == "shedlock" and r.random() < 0.8:
        # ShedLock's table holds leases only, one holder, no last start: mostly what works there
        h.update(strategy="lease", slots=None, min_interval=0)
    h["clock"] = r.random() < 0.2
    h["nested"] = None
    if h["mode"] == "run" and r.random() < 0.25:
        h["nested"] = {"key": r.choice(keys), "dsn": r.choice(["inherit", "inherit", "same"]),
                       "strategy": r.choice([None, None] + strategies),
                       "slots": None if r.random() < 0.7 else r.randint(1, 3)}
    return h


def draw_fault(r, backend, hosts, duration):
    # A full disk needs a tmpfs mounted, so root: as another user the draw leaves it out (and
    # a seed then draws another round than as root).
    sqlite = FAULTS_SQLITE if os.geteuid() == 0 else []
    kinds = FAULTS_ALL + (sqlite if backend == "sqlite" else FAULTS_SERVER)
    f = {"at": round(r.uniform(0.5, duration - 0.5), 2), "kind": r.choice(kinds), "host": r.randrange(len(hosts))}
    if f["kind"] == "row_hold":
        f["key"] = r.randrange(3)  # of the round's keys, modulo how many it has
    if f["kind"] in ("stop_dblock", "stop_group", "link_freeze", "disk_full", "row_hold"):
        f["secs"] = r.choice([0.5, 2, 5, 12])
    if f["kind"] == "server_restart":
        f["secs"] = r.choice([0.5, 2])
    if f["kind"] == "clock_step":
        f["step"] = r.choice([-3600, -90, -20, 20, 90, 3600])
    return f


def draw_round(seed, backends):
    r = random.Random(seed)
    backend = r.choice(backends)
    keys = [f"k{i}" for i in range(r.randint(1, 3))]
    # A farm in the middle of a rolling change: the hosts mostly agree (one configuration,
    # drawn), and each option of each host departs from it with a chance of its own.
    # Either every option may drift, or (a change rolled out one option at a time) only one
    # does, so that a break needing one disagreement is not masked by another's.
    common = draw_host(r, backend, keys)
    drift = r.choice([0.1, 0.25, 0.5])
    # (The options that decide who may hold a key weigh more.)
    only = r.choice([None] * 3 + ["strategy", "slots"] * 3 + ["table_format", "nested"] * 2 +
                    ["dsn_source", "mode", "pooler", "strategy_source", "min_hold", "min_interval", "ttl", "wait", "clock"])
    hosts = []
    for _ in range(r.randint(2, 6)):
        own = draw_host(r, backend, keys)
        if only:
            h = dict(common, **{only: own[only] if r.random() < 0.5 else common[only]})
        else:
            h = {f: (own[f] if r.random() < drift else common[f]) for f in common}
        if h["mode"] == "shell":
            h.update(strategy="lease", slots=None, nested=None)
        if h["dsn_source"] == "multihost":
            h["pooler"] = None
        if h["slots"]:
            h["min_interval"] = 0  # refused (64) before anything starts: a round of usage errors teaches little
        hosts.append(h)
    duration = round(r.uniform(8, 16), 1)
    faults = [draw_fault(r, backend, hosts, duration) for _ in range(r.choice([0, 1, 2, 3, 4, 6]))]
    faults.sort(key=lambda f: f["at"])
    return {"seed": seed, "backend": backend, "keys": keys, "hosts": hosts, "duration": duration, "faults": faults}


def upgrade_round(plan):
    """The round as a farm half upgraded: one configuration, each host on one of two versions."""
    r = random.Random(f"{plan['seed']}:versions")
    common = dict(plan["hosts"][0], nested=None, pooler=None, slots=None)
    if common["table_format"] == "shedlock":
        common.update(strategy="lease", min_interval=0)  # what ShedLock's table allows: else every run is refused
    if common["dsn_source"] == "multihost":
        common["dsn_source"] = "flag"
    n = len(plan["hosts"])
    versions = ["previous", "current"] + [r.choice(["previous", "current"]) for _ in range(n - 2)]
    r.shuffle(versions)
    return dict(plan, upgrade=True, hosts=[dict(common, version=v) for v in versions])


def key_counts(plan):
    """Every slot count (0: a plain lock) that some host uses on each key."""
    counts = collections.defaultdict(set)
    for h in plan["hosts"]:
        for k in h["keys"]:
            counts[k].add(h["slots"] or 0)
        if h["nested"]:
            counts[h["nested"]["key"]].add(h["nested"]["slots"] or 0)
    return counts


# ---------------------------------------------------------------- shrinking

def simpler(plan):
    """Smaller variants of a failing round, the boldest first: no faults at all, a shorter
    round, a host fewer, a fault fewer, a host with every option at its default, one option."""
    out = []

    def variant(change):
        p = json.loads(json.dumps(plan))
        change(p)
        out.append(p)

    if len(plan["faults"]) > 1:
        variant(lambda p: p.__setitem__("faults", []))
    if plan["duration"] > 6:
        variant(lambda p: p.__setitem__("duration", max(6, round(p["duration"] * 0.6, 1))))
    if len(plan["hosts"]) > 2:
        for i in range(len(plan["hosts"])):
            def drop(p, i=i):
                p["hosts"].pop(i)
                p["faults"] = [dict(f, host=f["host"] - (f["host"] > i)) for f in p["faults"] if f["host"] != i]
            variant(drop)
    for i in range(len(plan["faults"])):
        variant(lambda p, i=i: p["faults"].pop(i))
    defaults = {"mode": "run", "nested": None, "dsn_source": "flag", "pooler": None, "strategy_source": "flag",
                "min_hold": 0, "min_interval": 0, "wait": None, "E": None, "clock": False, "table_format": "dblock",
                "slots": None, "pause": [0.0, 0.2]}
    for i, h in enumerate(plan["hosts"]):
        changed = {f: v for f, v in defaults.items() if h.get(f) != v}
        if len(changed) > 1:
            variant(lambda p, i=i, changed=changed: p["hosts"][i].update(changed))
        for field, value in changed.items():
            variant(lambda p, i=i, field=field, value=value: p["hosts"][i].__setitem__(field, value))
        if h["nested"]:
            for field, value in (("strategy", None), ("slots", None), ("dsn", "inherit")):
                if h["nested"][field] != value:
                    variant(lambda p, i=i, field=field, value=value: p["hosts"][i]["nested"].__setitem__(field, value))
        if len(h["keys"]) > 1:
            for k in h["keys"]:
                variant(lambda p, i=i, k=k: p["hosts"][i]["keys"].remove(k))
    return out


def plan_size(plan):
    return (len(plan["hosts"]) * 10 + len(plan["faults"]) * 5
            + sum(sum(1 for f in ("nested", "pooler", "clock", "min_hold", "min_interval", "wait", "E", "slots") if h.get(f))
                  for h in plan["hosts"]))


# ---------------------------------------------------------------- the farm

class Farm:
    """What every round shares: the binary, the servers, the user the hosts run as."""

    def __init__(self, args):
        self.args = args
        self.dblock = os.path.abspath(args.dblock)
        self.base = tempfile.mkdtemp(prefix="dblock-adversary.")
        os.chmod(self.base, 0o755)
        self.tag = f"adv{os.getpid()}"
        self.prefix = f"{self.tag}_"
        self.bindir = os.path.join(self.base, "bin")
        os.mkdir(self.bindir)
        # Copies, not links: the hosts' users must read and run them, and a build directory
        # (or a checkout under /root) may be closed to them. The modules go beside the binary,
        # where dblock looks for them (next to its own executable).
        src = os.path.dirname(self.dblock)
        for name in ["dblock"] + [f for f in os.listdir(src) if re.fullmatch(r"dblock-\w+\.so", f)]:
            shutil.copy2(os.path.realpath(os.path.join(src, name)), os.path.join(self.bindir, name))
        # The previous release (rolling-upgrade rounds), in a directory of its own.
        self.previous_bindir = None
        if args.previous:
            self.previous_bindir = os.path.join(self.base, "bin-previous")
            os.mkdir(self.previous_bindir)
            psrc = os.path.dirname(os.path.abspath(args.previous))
            for name in ["dblock"] + [f for f in os.listdir(psrc) if re.fullmatch(r"dblock-\w+\.so", f)]:
                shutil.copy2(os.path.realpath(os.path.join(psrc, name)), os.path.join(self.previous_bindir, name))
        self.job = os.path.join(self.base, "adv_job.sh")
        shutil.copy2(JOB, self.job)
        os.chmod(self.job, 0o755)
        # Unix users for the hosts (as root): nobody first, then Debian's other system users
        # with no login of their own. A SQLite round runs every host as nobody (one file, one
        # owner: sharing it among users is SHARING A DATABASE FILE's business); a server round
        # gives each host its own user, as separate machines would.
        self.users = []
        if os.geteuid() == 0:
            for name in ("nobody", "daemon", "bin", "sys", "games", "man", "lp", "mail", "news"):
                try:
                    pw = pwd.getpwnam(name)
                except KeyError:
                    continue
                if pw.pw_uid != 0:
                    self.users.append((pw.pw_uid, pw.pw_gid))
        self.user = self.users[0] if self.users else None
        self.servers_state = None
        self.env = {}
        self.libfaketime = next((p for p in ("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
                                             "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
                                             "/usr/lib/faketime/libfaketime.so.1") if os.path.exists(p)), None)
        self.totals = collections.Counter()
        self.faults = collections.Counter()
        self.refusals = collections.Counter()
        self.exits = collections.Counter()
        self.live = set()   # hosts' dblocks running now, ended (by group) if the farm is stopped

    def start_servers(self, backends):
        if not any(b in ("mysql", "postgres") for b in backends):
            return
        self.servers_state = os.path.join(self.base, "servers.state")
        env = dict(os.environ, DBLOCK_TEST_SERVERS_STATE=self.servers_state)
        out = subprocess.run([SERVERS, "start"], env=env, capture_output=True, text=True)
        if out.returncode != 0:
            sys.stderr.write(out.stderr)
            raise SystemExit("adversary: the test servers did not start (their log is above)")
        for line in out.stdout.splitlines():
            m = re.match(r"export (\w+)=(.*)", line)
            if m:
                self.env[m.group(1)] = m.group(2)

    def stop_servers(self):
        if self.servers_state:
            subprocess.run([SERVERS, "stop"], env=dict(os.environ, DBLOCK_TEST_SERVERS_STATE=self.servers_state),
                           capture_output=True)

    def chown(self, path, user=None):
        if self.user:
            os.chown(path, *(user or self.user))

    def server_dsn(self, backend, pooler=None):
        if backend == "mysql":
            return self.env["DBLOCK_TEST_MYSQL_DSN"]
        if pooler == "transaction":
            return self.env["DBLOCK_TEST_PGBOUNCER_DSN"]
        if pooler == "session":
            return self.env["DBLOCK_TEST_PGBOUNCER_SESSION_DSN"]
        return self.env["DBLOCK_TEST_POSTGRES_DSN"]

    def admin_sql(self, backend, sql, timeout=20):
        """One statement as the servers' test user, on the direct port (not through a proxy)."""
        dsn = self.server_dsn(backend)
        if backend == "postgres":
            cmd = ["psql", dsn, "-XAtq", "-c", sql]
        else:
            m = re.match(r"mysql://([^:]+):([^@]+)@127\.0\.0\.1:(\d+)/(\w+)", dsn)
            cmd = ["mariadb", "-h127.0.0.1", f"-P{m.group(3)}", f"-u{m.group(1)}", f"-p{m.group(2)}", "-N", "-B",
                   m.group(4), "-e", sql]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return out.stdout.strip() if out.returncode == 0 else None

    def cleanup(self):
        for p in list(self.live):
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.stop_servers()
        if not self.args.keep:
            shutil.rmtree(self.base, ignore_errors=True)


class Round:
    def __init__(self, farm, plan, label):
        self.farm, self.plan, self.label = farm, plan, label
        self.backend = plan["backend"]
        self.dir = tempfile.mkdtemp(prefix="round.", dir=farm.base)
        os.chmod(self.dir, 0o755)
        self.oracle = os.path.join(self.dir, "oracle")
        self.t0 = None
        self.lock = threading.Lock()
        self.current = {}      # host index -> Popen of its running dblock (or script)
        self.events = []       # (t, host, text)
        self.runs = []         # dicts: host, run, key, argv, rc, started, stderr
        self.breaches = []
        self.proxies = {}
        self.mount = None
        self.stats = collections.Counter()
        self.faults = collections.Counter()
        self.refusals = collections.Counter()
        self.exits = collections.Counter()
        self.children = []
        self.host_dsn = {}
        self.faulted = set()   # runs a fault was aimed at: they may die of a signal

    # -- set-up
    def event(self, host, text):
        with self.lock:
            self.events.append((round(now() - self.t0, 3) if self.t0 else 0.0, str(host), text))

    def setup(self):
        farm, plan = self.farm, self.plan
        os.mkdir(self.oracle)
        os.chmod(self.oracle, 0o777)  # every host's user writes here (adv_job.sh makes its files 0666)
        with open(os.path.join(self.oracle, "log"), "a"):
            pass
        os.chmod(os.path.join(self.oracle, "log"), 0o666)
        for k, counts in key_counts(plan).items():
            with open(os.path.join(self.oracle, f"{k}.counts"), "w") as f:
                f.write(" ".join(str(c) for c in sorted(counts)) + "\n")
        for name in os.listdir(self.oracle):
            farm.chown(os.path.join(self.oracle, name))
        self.keyname = {k: f"{farm.tag}-{self.label}-{k}" for k in plan["keys"]}
        if self.backend == "sqlite":
            db = os.path.join(self.dir, "db")
            os.mkdir(db)
            if any(f["kind"] == "disk_full" for f in plan["faults"]):
                subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "dblock-adversary", db], check=True)
                self.mount = db
            farm.chown(db)
            os.chmod(db, 0o700)
            self.dsn = {None: f"sqlite:{db}/locks.db"}
        self.hostdirs = []
        for i, h in enumerate(plan["hosts"]):
            hd = os.path.join(self.dir, f"h{i}")
            for sub in ("", "home", "config", "config/dblock", "data", "state", "runs"):
                os.makedirs(os.path.join(hd, sub), exist_ok=True)
                farm.chown(os.path.join(hd, sub), self.user_of(i))
            with open(os.path.join(hd, "clock"), "w") as f:
                f.write("+0\n")
            farm.chown(os.path.join(hd, "clock"), self.user_of(i))
            self.hostdirs.append(hd)
            if self.backend != "sqlite":
                self.start_proxy(i, h)
            self.write_host_files(i, h)
        self.before = self.snapshot()

    def start_proxy(self, i, h):
        target = self.farm.server_dsn(self.backend, h["pooler"])
        port = int(re.search(r"@127\.0\.0\.1:(\d+)", target).group(1))
        pf = os.path.join(self.dir, f"proxy{i}.port")
        p = subprocess.Popen([sys.executable, PROXY, "--target-port", str(port), "--port-file", pf, "--state-file",
                              pf + ".state", "--lifetime", str(int(self.plan["duration"] + 300))],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.children.append(p)
        deadline = now() + 10
        while not (os.path.exists(pf) and open(pf).read().strip()) and now() < deadline:
            time.sleep(0.02)
        pport = int(open(pf).read())
        self.proxies[i] = p
        dsn = target.replace(f"@127.0.0.1:{port}", f"@127.0.0.1:{pport}")
        if h["dsn_source"] == "multihost":
            dsn = dsn.replace(f"@127.0.0.1:{pport}", f"@127.0.0.1:{free_port()},127.0.0.1:{pport}")
        self.host_dsn[i] = dsn

    def user_of(self, i):
        if not self.farm.users or self.backend == "sqlite":
            return self.farm.user
        return self.farm.users[i % len(self.farm.users)]

    def dsn_of(self, i):
        return self.dsn[None] if self.backend == "sqlite" else self.host_dsn[i]

    def write_host_files(self, i, h):
        hd = self.hostdirs[i]
        with open(os.path.join(hd, "dsn"), "w") as f:
            f.write(self.dsn_of(i) + "\n")
        os.chmod(os.path.join(hd, "dsn"), 0o600)
        self.farm.chown(os.path.join(hd, "dsn"), self.user_of(i))
        conf = []
        if h["dsn_source"] == "config":
            conf.append(f'dsn = "{self.dsn_of(i)}"')
        if h["strategy_source"] == "config":
            conf.append(f'strategy = "{h["strategy"]}"')
        if conf:
            path = os.path.join(hd, "config", "dblock", "dblock.conf")
            with open(path, "w") as f:
                f.write("\n".join(conf) + "\n")
            os.chmod(path, 0o600)
            self.farm.chown(path, self.user_of(i))

    def snapshot(self):
        """Every file under the hosts' homes and XDG directories, and /var/lib/dblock."""
        seen = set()
        for hd in self.hostdirs:
            for sub in ("home", "config", "data", "state"):
                for root, _, files in os.walk(os.path.join(hd, sub)):
                    seen.update(os.path.join(root, f) for f in files)
        if os.path.isdir("/var/lib/dblock"):
            for root, _, files in os.walk("/var/lib/dblock"):
                seen.update(os.path.join(root, f) for f in files)
        return seen

    # -- one host's invocation
    def host_env(self, i, h, run_id):
        hd = self.hostdirs[i]
        bindir = self.farm.bindir
        if h.get("version") == "previous":
            if not self.farm.previous_bindir:
                raise SystemExit("adversary: this round has hosts of the previous release: give --previous PATH")
            bindir = self.farm.previous_bindir
        env = {"PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin", "HOME": os.path.join(hd, "home"),
               "XDG_CONFIG_HOME": os.path.join(hd, "config"), "XDG_DATA_HOME": os.path.join(hd, "data"),
               "XDG_STATE_HOME": os.path.join(hd, "state"), "LANG": "C.UTF-8", "ADV_RUN": run_id,
               "DBLOCK_TABLE_PREFIX": self.farm.prefix + h.get("prefix", ""), "ADV_WAY": self.way(h)}
        if h["dsn_source"] == "env":
            env["DBLOCK_DSN"] = self.dsn_of(i)
        if h["dsn_source"] == "file_env":
            env["DBLOCK_DSN_FILE"] = os.path.join(hd, "dsn")
        if h["strategy_source"] == "env":
            env["DBLOCK_STRATEGY"] = h["strategy"]
        if h["clock"] and self.farm.libfaketime:
            # LD_PRELOAD itself is set after setpriv (below): libfaketime loaded into root's
            # setpriv would make its shared semaphore root's, which the host's user cannot open.
            env.update(DONT_FAKE_MONOTONIC="1", FAKETIME_NO_CACHE="1", FAKETIME_DISABLE_SHM="1",
                       FAKETIME_TIMESTAMP_FILE=os.path.join(hd, "clock"))
        return env

    def global_opts(self, i, h, dsn=True, strategy=True):
        o = []
        if dsn and h["dsn_source"] in ("flag", "multihost"):
            o += ["-d", self.dsn_of(i)]
        if dsn and h["dsn_source"] == "file_flag":
            o += ["--dsn-file", os.path.join(self.hostdirs[i], "dsn")]
        if strategy and h["strategy_source"] == "flag":
            o += ["-s", h["strategy"]]
        if h["table_format"] == "shedlock":
            o += ["--table-format", "shedlock", "--table", f"{self.farm.prefix}shedlock"]
        return o

    def run_opts(self, h):
        o = ["--ttl", f"{h['ttl']}s"]
        if h["slots"]:
            o += ["--slots", str(h["slots"])]
        if h["min_hold"]:
            o += ["--min-hold", f"{h['min_hold']}s"]
        if h["min_interval"]:
            o += ["--min-interval", f"{h['min_interval']}s"]
        if h["wait"] is not None:
            o += ["-w", f"{h['wait']}s"]
        if h["E"] is not None:
            o += ["-E", str(h["E"])]
        return o

    def argv(self, i, h, key, secs, rng):
        job = [self.farm.job, self.oracle, key, str(h["slots"] or 0), f"{secs:.2f}"]
        if h["mode"] == "shell":
            return ["sh", "-c", self.shell_script(i, h, key, secs)]
        cmd = ["dblock"] + self.global_opts(i, h) + ["run"] + self.run_opts(h) + [self.keyname[key], "--"] + job
        n = h["nested"]
        if n:
            inner = dict(h, slots=n["slots"], wait=None, E=None, min_hold=0, min_interval=0)
            if n["strategy"]:
                inner = dict(inner, strategy=n["strategy"], strategy_source="flag")
            isecs = max(0.1, secs * rng.uniform(0.3, 0.9))
            cmd += ["env", f"ADV_WAY={self.way(inner)} (nested)", "dblock"] + self.global_opts(i, inner, dsn=n["dsn"] == "same", strategy=bool(n["strategy"])) + \
                ["run"] + self.run_opts(inner) + [self.keyname[n["key"]], "--",
                                                  self.farm.job, self.oracle, n["key"], str(n["slots"] or 0), f"{isecs:.2f}"]
        return cmd

    @staticmethod
    def way(h):
        """How a host locks, as the oracle's breach lines name it."""
        return f"{h['strategy']}/{h['table_format']}/{h['mode']}" + (f"/slots {h['slots']}" if h["slots"] else "") + \
            (" (previous release)" if h.get("version") == "previous" else "")

    def shell_script(self, i, h, key, secs):
        """The README's acquire / renew / release pattern, its steps the oracle's job."""
        db = " ".join(shlex.quote(a) for a in ["dblock"] + self.global_opts(i, h))
        k = shlex.quote(self.keyname[key])
        step = f"{shlex.quote(self.farm.job)} {shlex.quote(self.oracle)} {key} 0 {min(secs, h['ttl'] / 3):.2f}"
        # acquire takes --ttl and -w of the run options (and -E 0, as the README's script)
        extra = " ".join(shlex.quote(a) for a in self.run_opts(dict(h, E=None, min_hold=0, min_interval=0, slots=None)))
        return f"""set -e
token=$({db} acquire {k} {extra} -E 0)
[ -n "$token" ] || exit 0
trap '{db} release {k} --token "$token"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
DBLOCK_TOKEN=$token ADV_FENCED=1 {step}
{db} renew {k} --token "$token" --ttl {h['ttl']}s
DBLOCK_TOKEN=$token ADV_FENCED=1 {step}
"""

    def host_loop(self, i, h, t_end):
        rng = random.Random(f"{self.plan['seed']}:{i}")
        n = 0
        while now() < t_end:
            key = rng.choice(h["keys"])
            secs = rng.uniform(*h["job"])
            run_id = f"h{i}.{n}"
            n += 1
            argv = self.argv(i, h, key, secs, rng)
            if h["clock"] and self.farm.libfaketime:
                argv = ["env", f"LD_PRELOAD={self.farm.libfaketime}"] + argv
            if self.farm.user:
                uid, gid = self.user_of(i)
                argv = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                        "--"] + argv
            err = os.path.join(self.hostdirs[i], "runs", run_id + ".err")
            t = now()
            with open(err, "w") as ef:
                p = subprocess.Popen(argv, env=self.host_env(i, h, run_id), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=ef, cwd=self.hostdirs[i], start_new_session=True)
            with self.lock:
                self.current[i] = (p, run_id)
            self.farm.live.add(p)
            self.event(i, f"{run_id} {key} starts")
            rc = p.wait()
            with self.lock:
                self.current.pop(i, None)
            self.farm.live.discard(p)
            self.runs.append({"host": i, "run": run_id, "key": key, "rc": rc, "secs": round(now() - t, 2),
                              "err": err, "argv": argv})
            self.event(i, f"{run_id} {key} exits {rc}")
            time.sleep(rng.uniform(*h["pause"]))

    # -- faults
    def target(self, i):
        with self.lock:
            return self.current.get(i, (None, None))

    def job_pgids(self, run_id):
        """Process groups of the jobs of RUN_ID that are alive now (from the oracle log)."""
        pgids = set()
        for line in open(os.path.join(self.oracle, "log")):
            parts = line.split()
            if parts[0] == "start" and parts[-1] == run_id:
                try:
                    stat = open(f"/proc/{parts[6]}/stat").read()
                    pgids.add(int(stat.rsplit(")", 1)[1].split()[2]))
                except (OSError, IndexError, ValueError):
                    pass
        return pgids

    def fault(self, f):
        kind, i = f["kind"], f["host"]
        p, run_id = self.target(i)
        what = kind
        if run_id and kind.startswith("kill_"):
            self.faulted.add(run_id)
        try:
            if kind in ("kill_dblock", "kill_group", "kill_job", "stop_dblock", "stop_group") and p is None:
                what += " (no run)"
            elif kind == "kill_dblock":
                os.kill(p.pid, signal.SIGKILL)
            elif kind == "kill_group":
                os.killpg(p.pid, signal.SIGKILL)
            elif kind == "kill_job":
                groups = self.job_pgids(run_id)
                for g in groups:
                    os.killpg(g, signal.SIGKILL)
                what += f" ({len(groups)} group(s))"
            elif kind in ("stop_dblock", "stop_group"):
                send = (lambda s: os.kill(p.pid, s)) if kind == "stop_dblock" else (lambda s: os.killpg(p.pid, s))
                send(signal.SIGSTOP)
                self.event(i, f"fault {kind} {run_id} for {f['secs']}s")
                self.faults[kind] += 1
                time.sleep(f["secs"])
                try:
                    send(signal.SIGCONT)
                except ProcessLookupError:
                    pass
                return
            elif kind == "clock_step":
                path = os.path.join(self.hostdirs[i], "clock")
                with open(path, "w") as fh:
                    fh.write(f"{f['step']:+d}\n")
                what += f" {f['step']:+d}s"
            elif kind == "disk_full":
                filler = os.path.join(self.mount, "filler")
                subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
                self.event(i, f"fault disk_full for {f['secs']}s")
                self.faults[kind] += 1
                time.sleep(f["secs"])
                os.unlink(filler)
                return
            elif kind == "row_hold":
                # A DBA's (or another tool's) transaction holds the key's row locked a while.
                key = self.plan["keys"][f.get("key", 0) % len(self.plan["keys"])]
                table, name = f"{self.farm.prefix}locks", self.keyname[key]
                sleep = "pg_sleep" if self.backend == "postgres" else "SLEEP"
                begin = "BEGIN" if self.backend == "postgres" else "START TRANSACTION"
                self.event(i, f"fault row_hold {key} for {f['secs']}s")
                self.faults[kind] += 1
                self.farm.admin_sql(self.backend, f"{begin}; SELECT 1 FROM {table} WHERE name = '{name}' FOR UPDATE;"
                                    f" SELECT {sleep}({f['secs']}); COMMIT", timeout=f["secs"] + 30)
                return
            elif kind == "session_kill":
                what += " " + (self.kill_session() or "(no session)")
            elif kind in ("link_freeze", "link_reset"):
                proxy = self.proxies[i]
                if kind == "link_reset":
                    proxy.send_signal(signal.SIGHUP)
                else:
                    proxy.send_signal(signal.SIGUSR1)
                    self.event(i, f"fault link_freeze for {f['secs']}s")
                    self.faults[kind] += 1
                    time.sleep(f["secs"])
                    proxy.send_signal(signal.SIGUSR2)
                    return
            elif kind == "server_restart":
                env = dict(os.environ, DBLOCK_TEST_SERVERS_STATE=self.farm.servers_state)
                self.event(i, f"fault server_restart {self.backend} down {f['secs']}s")
                self.faults[kind] += 1
                subprocess.run([SERVERS, "restart", self.backend, str(f["secs"])], env=env, capture_output=True)
                self.event(i, "server up again")
                return
        except ProcessLookupError:
            what += " (gone)"
        self.faults[kind] += 1
        self.event(i, f"fault {what} {run_id or ''}".rstrip())

    def kill_session(self):
        """Ends a server session of dblock's: the holder of a key when one is recorded, else any."""
        users_sessions = {
            "postgres": "SELECT pid FROM pg_stat_activity WHERE usename = current_user AND pid <> pg_backend_pid()"
                        " AND backend_type = 'client backend' ORDER BY random() LIMIT 1",
            "mysql": "SELECT id FROM information_schema.processlist WHERE user = current_user() AND id <> connection_id()"
                     " ORDER BY rand() LIMIT 1"}
        sid = self.farm.admin_sql(self.backend, users_sessions[self.backend])
        if not sid or not sid.isdigit():
            return None
        if self.backend == "postgres":
            self.farm.admin_sql(self.backend, f"SELECT pg_terminate_backend({sid})")
        else:
            self.farm.admin_sql(self.backend, f"KILL CONNECTION {sid}")
        return f"session {sid}"

    def fault_loop(self):
        for f in self.plan["faults"]:
            delay = self.t0 + f["at"] - now()
            if delay > 0:
                time.sleep(delay)
            self.fault(f)

    # -- the round
    def run(self):
        self.setup()
        self.t0 = now()
        t_end = self.t0 + self.plan["duration"]
        threads = [threading.Thread(target=self.host_loop, args=(i, h, t_end), daemon=True)
                   for i, h in enumerate(self.plan["hosts"])]
        faults = threading.Thread(target=self.fault_loop, daemon=True)
        for t in threads + [faults]:
            t.start()
        faults.join()
        # The grace: the longest wait and lease of any host, a stopped process's pause, and room.
        grace = max((h["wait"] or 0) + 2 * h["ttl"] + 3 * max(h["job"]) for h in self.plan["hosts"]) + 30
        deadline = t_end + grace
        for t in threads:
            t.join(max(0.1, deadline - now()))
        for i, t in enumerate(threads):
            if t.is_alive():
                p, run_id = self.target(i)
                self.breach("hang", f"host {i} run {run_id} still running {grace:.0f} s after the round ended")
                if p:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                t.join(10)
        self.teardown()
        self.judge()
        return not self.breaches

    def teardown(self):
        for p in self.children:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
                p.wait()
        # Jobs of killed dblocks may outlive the round (their tree is the oracle's business
        # until then): wait for their slot files to be free, then unmount.
        deadline = now() + 30
        for name in os.listdir(self.oracle):
            if ".tree." in name:
                path = os.path.join(self.oracle, name)
                with open(path, "a") as fh:
                    while now() < deadline:
                        try:
                            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                            break
                        except OSError:
                            time.sleep(0.1)
        if self.mount:
            subprocess.run(["umount", self.mount], capture_output=True)

    def breach(self, kind, text):
        self.breaches.append((kind, text))

    def judge(self):
        over = os.path.join(self.oracle, "over")
        if os.path.exists(over):
            for line in open(over):
                kind = ("overlap" if line.startswith("slot already held") else
                        "slot counts" if line.startswith("runs while") else
                        "slot number" if "not below" in line else "token")
                self.breach(kind, line.strip())
        fenced = os.path.join(self.oracle, "fenced")
        if os.path.exists(fenced):
            self.stats["fenced"] += sum(1 for _ in open(fenced))
        starts = collections.Counter()
        for line in open(os.path.join(self.oracle, "log")):
            parts = line.split()
            if parts and parts[0] == "start":
                starts[parts[-1]] += 1
        for r in self.runs:
            rc = r["rc"]
            self.stats["runs"] += 1
            self.exits[rc] += 1
            if starts.get(r["run"]):
                self.stats["started"] += 1
            if rc == 78:
                self.refusals[self.reason(r["err"])] += 1
            if rc == 64:
                self.refusals["usage (64): " + self.reason(r["err"])] += 1
            if rc < 0 or rc > 128:
                # dblock, or the script's dblock or step, died of a signal: only a fault's doing
                if r["run"] not in self.faulted:
                    self.breach("crash", f"run {r['run']} died of signal {-rc if rc < 0 else rc - 128} with no"
                                f" fault aimed at it: {self.tail(r['err'])}")
                continue
            h = self.plan["hosts"][r["host"]]
            ok = DOCUMENTED | ({h["E"]} if h["E"] is not None else set())
            if rc in (126, 127):
                # the job always exists here: the host's user could not run it (a set-up fault)
                self.breach("set-up", f"run {r['run']} exited {rc}: the job or dblock could not be run: {self.tail(r['err'])}")
            elif rc not in ok:
                self.breach("exit", f"run {r['run']} exited {rc}, not a documented status: {self.tail(r['err'])}")
        after = self.snapshot()
        for path in sorted(after - self.before):
            self.breach("stray file", f"{path} appeared outside the configured paths")

    @staticmethod
    def tail(path):
        try:
            lines = [l.strip() for l in open(path, errors="replace") if l.strip()]
        except OSError:
            return ""
        return " | ".join(lines[-2:])[:300]

    @staticmethod
    def reason(path):
        text = open(path, errors="replace").read()
        for name, pattern in REASONS:
            if re.search(pattern, text):
                return name
        first = next((l for l in text.splitlines() if l.startswith("dblock") and "warning:" not in l),
                     text.strip()[:80])
        return re.sub(r"[0-9]+", "N", first)[:90]

    def report(self, out):
        plan = self.plan
        out.write(f"--- round {self.label}: seed {plan['seed']}, {plan['backend']}, keys {' '.join(plan['keys'])},"
                  f" {plan['duration']} s\n")
        for i, h in enumerate(plan["hosts"]):
            desc = {k: v for k, v in h.items() if not k.startswith("_")}
            out.write(f"    host {i}: {json.dumps(desc, separators=(',', ':'))}\n")
        for f in plan["faults"]:
            out.write(f"    fault: {json.dumps(f, separators=(',', ':'))}\n")
        for kind, text in self.breaches[:20]:
            out.write(f"  BREACH {kind}: {text}\n")
        out.write("    timeline (s from the round's start, host, event):\n")
        log = []
        for line in open(os.path.join(self.oracle, "log")):
            parts = line.split()
            t = int(parts[5 if parts[0] == "start" else 3]) / 1e9 - self.t0
            log.append((round(t, 3), parts[-1].split(".")[0][1:] if parts[-1].startswith("h") else "?",
                        " ".join(parts[:5] if parts[0] == "start" else parts[:3] + parts[5:6]) + " " + parts[-1]))
        for t, host, text in sorted(self.events + log)[:400]:
            out.write(f"    {t:8.3f} h{host} {text}\n")
        for r in self.runs:
            if r["rc"] not in (0, 75) and r["rc"] >= 0:
                out.write(f"    run {r['run']} exit {r['rc']}: {self.tail(r['err'])}\n")


def run_round(farm, plan, label):
    rnd = Round(farm, plan, label)
    clean = rnd.run()
    farm.totals.update(rnd.stats)
    farm.totals["rounds"] += 1
    farm.faults.update(rnd.faults)
    farm.refusals.update(rnd.refusals)
    farm.exits.update(rnd.exits)
    return clean, rnd


def shrink(farm, plan, budget, tries, out, want=None):
    """Greedy: keep the first simpler variant that still fails (within `tries` attempts)."""
    deadline = now() + budget
    best, last = plan, None
    progress = True
    n = 0
    while progress and now() < deadline:
        progress = False
        for cand in simpler(best):
            if now() >= deadline:
                break
            clean = True
            for _ in range(tries):
                n += 1
                clean, rnd = run_round(farm, cand, f"shrink{n}")
                if want and not any(k == want for k, _ in rnd.breaches):
                    clean = True  # another breach than the one being shrunk
                if not clean:
                    break
            if not clean:
                best = cand
                progress = True
                out.write(f"  shrink: still fails with {len(cand['hosts'])} hosts, {len(cand['faults'])} faults"
                          f" (size {plan_size(cand)})\n")
                out.flush()
                last = rnd
                break
    return best, last


def replay_command(plan, dblock):
    return (f"tests/adversary/adversary.py --dblock {shlex.quote(dblock)} --repeat 5"
            f" --plan {shlex.quote(json.dumps(plan, separators=(',', ':')))}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=parse_duration, default=300.0, help="run rounds for this long (default 5m)")
    ap.add_argument("--soak", action="store_true", help="go on after a breach until the budget is spent")
    ap.add_argument("--seeds", default="", help="round seeds to run first, comma-separated")
    ap.add_argument("--fresh", action="store_true", help="then a fresh random seed (printed), and its successors")
    ap.add_argument("--backends", default="sqlite,mysql,postgres")
    ap.add_argument("--dblock", default=os.environ.get("DBLOCK_BIN", os.path.join(SOURCE, "build", "dblock")))
    ap.add_argument("--shrink", type=parse_duration, default=180.0, help="time to shrink a failing round (0: off)")
    ap.add_argument("--tries", type=int, default=2, help="attempts per shrink candidate")
    ap.add_argument("--plan", help="replay this round (a JSON file or text) instead of drawing")
    ap.add_argument("--corpus", help="a directory of rounds (*.json) to replay first, once each: the shrunk"
                    " rounds of breaks found before")
    ap.add_argument("--repeat", type=int, default=1, help="with --plan: up to N times, until it fails")
    ap.add_argument("--want", help="shrink keeping this breach kind (e.g. 'slot counts'), not any breach")
    ap.add_argument("--keep", action="store_true", help="keep the rounds' directories")
    ap.add_argument("--previous", default=os.environ.get("DBLOCK_PREVIOUS_BIN"),
                    help="a dblock of the previous release: some fresh rounds are then rolling upgrades")
    ap.add_argument("--upgrades", type=float, default=0.25,
                    help="with --previous: the share of fresh rounds that are rolling upgrades (default 0.25)")
    ap.add_argument("--self-test", action="store_true",
                    help="one round the oracle must fail: two hosts whose table prefixes differ (two tables, two holders)")
    args = ap.parse_args()
    backends = args.backends.split(",")
    if not os.access(args.dblock, os.X_OK):
        print(f"adversary: no dblock binary at {args.dblock} (build it, or give --dblock)", file=sys.stderr)
        return 2
    if args.previous and not os.access(args.previous, os.X_OK):
        why = os.path.join(os.path.dirname(args.previous), "unavailable")
        why = open(why).read().strip() if os.path.exists(why) else "build the dblock_previous target"
        print(f"adversary: no previous release at {args.previous}: {why}", file=sys.stderr)
        return 2
    missing = [f"{tool} (Debian package {pkg})" for tool, pkg, need in (
        ("flock", "util-linux", True), ("setpriv", "util-linux", os.geteuid() == 0),
        ("psql", "postgresql-client", "postgres" in backends), ("mariadb", "mariadb-client", "mysql" in backends),
        ("faketime", "faketime", True)) if need and not shutil.which(tool)]
    out = sys.stdout
    # SIGTERM (ctest's timeout, a kill by pid) ends it through `finally`: the servers stop.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    farm = Farm(args)
    if not farm.libfaketime:
        missing.append("libfaketime.so.1 (Debian package libfaketime)")
    if missing:
        print(f"adversary: missing {', '.join(missing)}: scripts/install-deps.sh installs them", file=sys.stderr)
        farm.cleanup()
        return 2
    try:
        if args.self_test:
            host = {"mode": "run", "dsn_source": "flag", "pooler": None, "strategy": "lease", "strategy_source": "flag",
                    "table_format": "dblock", "slots": None, "ttl": 6, "min_hold": 0, "min_interval": 0, "wait": None,
                    "E": None, "keys": ["k0"], "job": [0.3, 1.0], "pause": [0.0, 0.1], "clock": False, "nested": None}
            plan = {"seed": 0, "backend": "sqlite", "keys": ["k0"], "duration": 6,
                    "hosts": [host, dict(host, prefix="other_")], "faults": []}
            clean, rnd = run_round(farm, plan, "selftest")
            kinds = {k for k, _ in rnd.breaches}
            out.write(f"self-test: {rnd.stats['runs']} runs, {rnd.stats['started']} started, breaches {sorted(kinds)}\n")
            if "overlap" in kinds and "token" in kinds:
                out.write("self-test: the oracle saw two holders of one key (two tables), and tokens given twice\n")
                return 0
            rnd.report(out)
            out.write("self-test: FAILED: two hosts on two tables ran one key side by side unseen\n")
            return 1
        if args.plan:
            text = open(args.plan).read() if os.path.exists(args.plan) else args.plan
            plan = json.loads(text)
            farm.start_servers([plan["backend"]])
            for n in range(args.repeat):
                clean, rnd = run_round(farm, plan, f"replay{n}")
                if args.want and not any(k == args.want for k, _ in rnd.breaches):
                    clean = True  # another kind of breach than the one asked for
                out.write(f"replay {n + 1}: {rnd.stats['runs']} runs, {rnd.stats['started']} started,"
                          f" {rnd.stats['fenced']} shell steps fenced: {'clean' if clean else 'BREACH'}\n")
                if not clean:
                    rnd.report(out)
                    if args.shrink > 0:
                        small, srnd = shrink(farm, plan, args.shrink, args.tries, out, args.want)
                        if srnd:
                            out.write("  shrunk to:\n")
                            srnd.report(out)
                            out.write(f"  replay the shrunk round: {replay_command(small, args.dblock)}\n")
                    return 1
            return 0
        farm.start_servers(backends)
        seeds = [int(s) for s in args.seeds.split(",") if s]
        corpus = sorted(os.path.join(args.corpus, f) for f in os.listdir(args.corpus)
                        if f.endswith(".json")) if args.corpus else []
        corpus = [p for p in corpus if json.load(open(p))["backend"] in backends]
        fresh = None
        if args.fresh:
            fresh = random.SystemRandom().randrange(1, 2 ** 31)
            out.write(f"adversary: fresh seed {fresh} (this run's rounds after the fixed seeds: {fresh}, {fresh + 1}, ...)\n")
        out.write(f"adversary: dblock {args.dblock}, backends {','.join(backends)}, budget {args.budget:.0f} s,"
                  f" hosts run as {f'{len(farm.users)} system users' if farm.user else 'this user'}, work dir {farm.base}\n")
        out.flush()
        start = now()
        failed = []
        n = ncorpus = 0
        while now() - start < args.budget:
            if corpus:
                path = corpus.pop(0)
                plan = json.load(open(path))
                n += 1
                ncorpus += 1
                clean, rnd = run_round(farm, plan, f"r{n}")
                out.write(f"round {n}: {os.path.basename(path)} {plan['backend']}: {rnd.stats['runs']} runs,"
                          f" {rnd.stats['started']} started, {sum(rnd.refusals.values())} refused:"
                          f" {'clean' if clean else 'BREACH'} ({now() - start:.0f} s in)\n")
                out.flush()
                if not clean:
                    failed.append(os.path.basename(path))
                    rnd.report(out)
                    out.write(f"  replay: tests/adversary/adversary.py --dblock {shlex.quote(args.dblock)} --plan {path}\n")
                    if not args.soak:
                        break
                continue
            k = n - ncorpus  # rounds drawn from seeds so far
            if k < len(seeds):
                seed = seeds[k]
            elif fresh is not None:
                seed = fresh + k - len(seeds)
            elif not seeds:
                seed = random.SystemRandom().randrange(1, 2 ** 31)
            else:
                break
            n += 1
            plan = draw_round(seed, backends)
            # Fresh rounds only: the fixed seeds stay the rounds they were chosen for.
            if args.previous and k >= len(seeds) and random.Random(f"{seed}:upgrade").random() < args.upgrades:
                plan = upgrade_round(plan)
            t = now()
            clean, rnd = run_round(farm, plan, f"r{n}")
            out.write(f"round {n}: seed {seed}{' upgrade' if plan.get('upgrade') else ''} {plan['backend']} {len(plan['hosts'])} hosts {len(plan['keys'])} keys"
                      f" {len(plan['faults'])} faults: {rnd.stats['runs']} runs, {rnd.stats['started']} started,"
                      f" {sum(rnd.refusals.values())} refused: {'clean' if clean else 'BREACH'}"
                      f" ({now() - t:.0f} s, {now() - start:.0f} s in)\n")
            out.flush()
            if clean:
                continue
            failed.append(seed)
            rnd.report(out)
            out.write(f"  replay: {replay_command(plan, args.dblock)}\n")
            out.write(f"  or: tests/adversary/adversary.py --dblock {shlex.quote(args.dblock)} --seeds {seed} --budget 1"
                      f" --backends {','.join(backends)}\n")
            if args.shrink > 0:
                small, srnd = shrink(farm, plan, args.shrink, args.tries, out)
                if srnd:
                    out.write("  shrunk to:\n")
                    srnd.report(out)
                    out.write(f"  replay the shrunk round: {replay_command(small, args.dblock)}\n")
            out.flush()
            if not args.soak:
                break
        t = farm.totals
        out.write(f"adversary: {t['rounds']} rounds, {t['runs']} runs, {t['started']} started, "
                  f"{t['fenced']} shell steps turned away by their token, "
                  f"{sum(farm.faults.values())} faults ({', '.join(f'{k} {v}' for k, v in sorted(farm.faults.items()))}), "
                  f"refusals: {dict(farm.refusals.most_common())}, exits: {dict(sorted(farm.exits.items()))}, "
                  f"rounds with a breach: {len(failed)} {failed if failed else ''}\n")
        if t["rounds"] and not t["started"]:
            out.write("adversary: not one job started in any round: the farm tested nothing (a set-up fault)\n")
            return 2
        return 1 if failed else 0
    finally:
        farm.cleanup()


if __name__ == "__main__":
    sys.exit(main())
