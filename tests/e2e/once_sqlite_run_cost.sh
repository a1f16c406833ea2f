#!/usr/bin/env bash
# What a `run` costs beyond the lock's own work (docs/performance.md, SQLite: dblock's own
# cost): its heartbeat thread allocates from the one malloc arena, so no run reserves a second
# arena's 64 MiB (and pays its trimming and a fresh heap's page faults); the default owner is
# still USER@HOST:PID:RANDOM (six hex digits at most), drawn anew by each run; nothing reads the
# time zone (the lease's end is formatted in UTC by arithmetic, not by glibc's gmtime_r, which
# reads /etc/localtime first); SQLite is linked in and the statements convert times through
# julianday. `dblock run ...` declares run's options alone (src/cli/app.cpp: a subcommand's
# options are declared when CLI11 starts parsing it; a config file with sections declares them
# all), yet a word it cannot parse still gets the whole parser's hint, which names the other
# subcommands. Counted with strace and /proc, so these are counts, not timings.
source "$(dirname "$0")/lib.sh"

command -v strace >/dev/null || skip_or_fail "strace is needed to see the mappings (scripts/install-deps.sh)"
strace -f -o /dev/null true 2>/dev/null || skip_or_fail "strace cannot trace here (ptrace not permitted)"

db="$E2E_TMP/cost.db"
dblock --dsn "sqlite:$db" init >/dev/null

trace="$E2E_TMP/trace"
for i in 1 2 3; do
  strace -f -qq -o "$trace" -e trace=mmap dblock --dsn "sqlite:$db" run k -- sleep 0.05 >/dev/null 2>&1
  check "run $i succeeded" test $? -eq 0
  # glibc reserves a new arena as one 64 MiB-aligned mapping of 128 MiB (HEAP_MAX_SIZE * 2).
  big=$(grep -cE 'mmap\(NULL, ([0-9]{9,}),' "$trace")
  echo "    run $i: $big mappings of 100 MB or more"
  check "run $i reserves no second malloc arena" test "$big" -eq 0
done

strace -f -qq -o "$trace" -e trace=open,openat dblock --dsn "sqlite:$db" -v run k -- true >/dev/null 2>&1
check "a -v run succeeded" test $? -eq 0
check "a run reads no time zone file" sh -c "! grep -qE 'localtime|zoneinfo' '$trace'"

owner_of() { dblock --dsn "sqlite:$db" run k -- sh -c 'printf %s "$DBLOCK_OWNER"'; }
first=$(owner_of)
second=$(owner_of)
echo "    owners: $first, $second"
pattern="^$(id -un)@$(hostname):[0-9]+:[0-9a-f]{1,6}\$"
check "the default owner is USER@HOST:PID:RANDOM" grep -qE "$pattern" <<<"$first"
check "the second run's owner has the same form" grep -qE "$pattern" <<<"$second"
check "each run draws its own owner" test "$first" != "$second"

# SQLite linked in (cmake/Dependencies.cmake, DBLOCK_STATIC_SQLITE): no libsqlite3.so for the
# loader to map and relocate at each start. The owner names the run's pid.
maps="$E2E_TMP/maps"
dblock --dsn "sqlite:$db" run k -- sh -c 'p=${DBLOCK_OWNER#*:}; cat "/proc/${p%%:*}/maps"' >"$maps"
check "a run with its maps succeeded" test $? -eq 0
check "the run's maps were read" grep -q . "$maps"
if [ "${DBLOCK_SQLITE_LINK:-static}" = static ]; then
  check "a run maps no libsqlite3.so (SQLite linked in)" sh -c "! grep -q libsqlite3 '$maps'"
else
  echo "    SQLite is linked as a shared library in this build (DBLOCK_SQLITE_LINK=$DBLOCK_SQLITE_LINK)"
fi

# The statements' epoch milliseconds through julianday (sqlite_connection.cpp, epoch_ms_sql):
# half the expression nodes of the strftime('%s') and strftime('%f') form, which every prepare
# pays for; the values are the same (unit.backends).
take="$E2E_TMP/take"
dblock schema --statements --dialect sqlite | awk '/^-- lease.take$/{f=1;next} /^-- /{f=0} f' >"$take"
check "the take was printed" grep -q "INSERT INTO" "$take"
check "the take converts times through julianday" grep -q "julianday('now')" "$take"
check "the take has no strftime('%s') conversion" sh -c "! grep -qF \"strftime('%s'\" '$take'"
# Epoch milliseconds through dblock_epoch_ms (sqlite_connection.cpp): the rounding and the 1970
# offset in C, three expression nodes where the take's RETURNING, coded for the insert and for
# the update, paid for eight; the boot lease judged without IS NOT NULLs its equality implies.
check "the take returns epoch ms through dblock_epoch_ms" grep -qF "dblock_epoch_ms(julianday(expires_at))" "$take"
check "the take has no CAST(round(...)) epoch conversion" sh -c "! grep -qF '210866760000000' '$take'"
check "the take's --min-interval judges the boot without IS NOT NULLs" \
  grep -qF "CASE WHEN l.boot_token IS l.token AND l.boot_id = dblock_boot_id()" "$take"

err="$E2E_TMP/err"
dblock --dsn "sqlite:$db" run k --json -- true 2>"$err"
check "run with another subcommand's option: usage" test $? -eq 64
check "the hint names the subcommands that have it" grep -qF "it is one of 'status', 'history'" "$err"
dblock --dsn "sqlite:$db" run k --slotz 2 -- true 2>"$err"
check "a misspelt option of run: usage" test $? -eq 64
check "the hint names run's option" grep -qF "did you mean '--slots', an option of 'run'?" "$err"
check "run --help shows run's usage" sh -c "dblock run --help | grep -q 'Usage: dblock run'"

# With a config file too: one naming only [run] is read by the one-subcommand parser, one with
# another subcommand's section by the whole one, and a misspelt key is reported once.
home="$E2E_TMP/home"
mkdir -p "$home/.config/dblock"
conf="$home/.config/dblock/dblock.conf"
as_user() { env -u DBLOCK_DSN -u DBLOCK_CONFIG -u XDG_CONFIG_HOME HOME="$home" "$@"; }
printf 'dsn = sqlite:%s\n[run]\nttl = 20s\n' "$db" >"$conf"
check "a config file with [run] only: the run works" as_user dblock run k -- true
printf 'dsn = sqlite:%s\n[status]\njson = true\n[run]\nttl = 20s\n' "$db" >"$conf"
check "a config file with [status] too: the run works" as_user dblock run k -- true
printf 'dsn = sqlite:%s\n[run]\nttll = 20s\n' "$db" >"$conf"
as_user dblock run k -- true 2>"$err"
check "a misspelt key in [run]: exit 78" test $? -eq 78
reported=$(grep -cF "line 3: unknown key 'ttll' in section [run] (did you mean 'ttl'?)" "$err")
assert_eq "the misspelt key is reported once, with its line" 1 "$reported"

# Only run's options are built for a run: its anonymous memory at the command's start (the
# command reads dblock's /proc/PID/status; the owner names the pid) is some 30 kB smaller than
# when a config section makes dblock declare every subcommand's. Main built them all either way
# (differences of -8 to +8 kB). Medians of three runs each, the file the same but the section.
rss_at_start() {
  as_user dblock run k -- sh -c 'p=${DBLOCK_OWNER#*:}; p=${p%%:*}; awk "/^RssAnon:/ {print \$2}" /proc/$p/status'
}
median3() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
printf 'dsn = sqlite:%s\n' "$db" >"$conf"
plain=$(median3 "$(rss_at_start)" "$(rss_at_start)" "$(rss_at_start)")
printf 'dsn = sqlite:%s\n[run]\nttl = 60s\n' "$db" >"$conf"
every=$(median3 "$(rss_at_start)" "$(rss_at_start)" "$(rss_at_start)")
echo "    RssAnon at the command's start: ${plain} kB, with a [run] section ${every} kB"
check "RssAnon was read" test -n "$plain" -a -n "$every"
check "a run without sections builds run's options alone (>= 16 kB less)" test $((every - plain)) -ge 16
# SQLite's page cache is not made ahead (sqlite_vfs.cpp, SQLITE_CONFIG_PAGECACHE): made ahead,
# its 20 slots were about 150 kB of anonymous memory at the command's start, each slot a fresh
# page touched (600-616 kB here then, 448-460 kB without). SQLite linked in, as installed.
if [ "${DBLOCK_SQLITE_LINK:-static}" = static ]; then
  check "no page cache made ahead: RssAnon at the command's start under 540 kB" test "$plain" -lt 540
fi

finish
