#!/usr/bin/env bash
# Messages that say what to do (dblock(1), DIAGNOSTICS): each mistake gets its exit status and
# one line naming the problem and the fix. The lines are compared whole. SQLite only.
source "$(dirname "$0")/lib.sh"

out=$E2E_TMP/out
err=$E2E_TMP/err

# Subcommands: a typo gets a suggestion; help and -V work.
expect_line "unknown subcommand" 64 "dblock: unknown subcommand 'stauts' (did you mean 'status'?)" dblock stauts
expect_line "unknown subcommand, nothing close" 64 "dblock: unknown subcommand 'frobnicate' ('dblock help' lists them)" dblock frobnicate
expect_line "no subcommand" 64 "dblock: no subcommand given ('dblock help' lists them)" dblock
expect_line "help of an unknown subcommand" 64 "dblock: unknown subcommand 'relase' (did you mean 'release'?)" dblock help relase
assert_status "help" 0 dblock help >"$out"
check "help lists the subcommands" grep -q "^  status" "$out"
assert_status "help run" 0 dblock help run >"$out" 2>"$err"
check "help run prints run's usage" grep -q "Usage: dblock run" "$out"
check "help run does not ask for a key" bash -c "! grep -q 'required' '$err'"
check "help shows DURATION" grep -q -- "--ttl DURATION" "$out"
assert_status "-V" 0 dblock -V >"$out"
check "-V prints the version" grep -q "^dblock [0-9]" "$out"

# Values in plain words.
expect_line "--token abc" 64 "dblock: --token: 'abc' is not a fencing token (a whole number from 1 up)" \
  dblock release k --token abc
expect_line "--limit x" 64 "dblock: --limit: 'x' is not a whole number from 1 to 1000000" dblock history --limit x
expect_line "-E x" 64 "dblock: --conflict-exit-code: 'x' is not a whole number from 0 to 255" dblock run k -E x -- true

# The command of run goes after --: the corrected line is printed back.
expect_line "run -w 2 without --" 64 \
  "dblock: run: the command goes after '--' (options after it are the command's): dblock run k -w 2 -- echo hi" \
  dblock run k -w 2 echo hi
expect_line "run with the command's option, without --" 64 \
  "dblock: run: the command goes after '--' (options after it are the command's): dblock run k -- ls -l" \
  dblock run k ls -l
# Without an error too: in `run k curl -s URL` dblock would have taken -s for its own.
expect_line "run with a command that happens to parse, without --" 64 \
  "dblock: run: the command goes after '--' (options after it are the command's): dblock run k -- echo hi" \
  dblock run k echo hi
check "the command did not run" bash -c "! grep -q hi '$out'"
expect_line "corrected line quotes and redacts" 64 \
  "dblock: run: the command goes after '--' (options after it are the command's): dblock -d 'mysql://u:****@127.0.0.1:1/db' run k -- ls -l 'a b'" \
  dblock -d mysql://u:Sup3rS3cret@127.0.0.1:1/db run k ls -l 'a b'

# The config file: file and line, a suggestion for a misspelt key, the source of a bad value.
conf=$E2E_TMP/dblock.conf
printf '# lock database\ntable-prefix = "m_"\ndns = "sqlite:/tmp/x.db"\n' >"$conf"
expect_line "unknown config key" 78 "dblock: config file $conf line 3: unknown key 'dns' (did you mean 'dsn'?)" \
  dblock --config "$conf" status
# A subcommand's own section names the file and line too.
printf '# run defaults\n[run]\nttl = "5x"\n' >"$conf"
expect_line "refused duration in the config file's [run] section" 78 \
  "dblock: config file $conf line 3: --ttl: invalid duration '5x': unknown unit 'x' (use e.g. 250ms, 30s, 5m, 10min, 1h30m, \"1h 30min\", 2d or a number of seconds)" \
  dblock --config "$conf" run "$(key section)" -- true
printf 'strategy = "sideways"\n' >"$conf"
expect_line "bad strategy in the config file" 78 \
  "dblock: config file $conf line 1: unknown strategy 'sideways' (use lease, advisory, for-update or txn-insert)" \
  env -u DBLOCK_STRATEGY "$DBLOCK_BIN" --config "$conf" run k -- true
expect_line "status with a bad config value fails as run does" 78 \
  "dblock: config file $conf line 1: unknown strategy 'sideways' (use lease, advisory, for-update or txn-insert)" \
  env -u DBLOCK_STRATEGY "$DBLOCK_BIN" --config "$conf" status
expect_line "bad strategy on the command line" 64 \
  "dblock: unknown strategy 'sideways' (use lease, advisory, for-update or txn-insert)" dblock -s sideways status
printf 'connect-timeout = "5s"\nhistory-keep = "many"\n' >"$conf"
expect_line "refused number in the config file" 78 \
  "dblock: config file $conf line 2: --history-keep: 'many' is not a whole number from 1 to 2147483647" \
  dblock --config "$conf" status
printf 'strategy = "sideways"\n' >"$conf"
# status inspects only: the database must exist first (dblock init makes it).
assert_status "init" 0 dblock init
assert_status "the command line beats a bad config value" 0 dblock --config "$conf" -s lease status >/dev/null

# --dsn-file: the reason and where the name came from.
expect_line "missing --dsn-file" 78 "dblock: cannot read --dsn-file $E2E_TMP/none: No such file or directory" \
  dblock --dsn-file "$E2E_TMP/none" status
expect_line "missing DBLOCK_DSN_FILE" 78 "dblock: cannot read DBLOCK_DSN_FILE $E2E_TMP/none: No such file or directory" \
  env -u DBLOCK_DSN DBLOCK_DSN_FILE="$E2E_TMP/none" "$DBLOCK_BIN" status
mkdir -p "$E2E_TMP/private" && chmod 755 "$E2E_TMP" "$E2E_TMP/private"
echo "sqlite:$E2E_TMP/private/x.db" >"$E2E_TMP/private/dsn" && chmod 000 "$E2E_TMP/private/dsn"
# EACCES needs a user the mode applies to: root reads anything, so as root dblock runs as nobody.
as_other=()
[ "$(id -u)" = 0 ] && as_other=(setpriv --reuid=65534 --regid=65534 --clear-groups)
expect_line "unreadable DBLOCK_DSN_FILE" 78 \
  "dblock: cannot read DBLOCK_DSN_FILE $E2E_TMP/private/dsn: Permission denied" \
  "${as_other[@]}" env -u DBLOCK_DSN DBLOCK_DSN_FILE="$E2E_TMP/private/dsn" "$DBLOCK_BIN" status

# Passwords: a DSN file readable by others warns as a config file does; argv warns without -v.
echo "mysql://u:Sup3rS3cret@127.0.0.1:1/db?connect-timeout=2" >"$E2E_TMP/secret.dsn"
chmod 644 "$E2E_TMP/secret.dsn"
expect_line "world-readable DSN file with a password" 69 \
  "dblock: warning: DSN file $E2E_TMP/secret.dsn holds a password and is readable by other users (mode 0644; chmod 600 it)" \
  dblock --dsn-file "$E2E_TMP/secret.dsn" status
chmod 600 "$E2E_TMP/secret.dsn"
dblock --dsn-file "$E2E_TMP/secret.dsn" status >/dev/null 2>"$err"
check "a private DSN file does not warn" bash -c "! grep -q 'readable by other users' '$err'"
expect_line "password in argv warns without -v" 69 \
  "dblock: warning: a password on the command line was visible to ps until now; use --dsn-file or ~/.my.cnf / ~/.pgpass" \
  dblock -d 'mysql://u:Sup3rS3cret@127.0.0.1:1/db?connect-timeout=2' status
if grep -q Sup3rS3cret "$err" "$out"; then fail "password printed"; else pass "password never printed"; fi

# --ttl alone just works: the default --kill-after shrinks to fit (at most ttl/3 - 1s).
expect_line "--ttl 10s alone" 0 "dblock: --kill-after 2s" dblock -v run "$(key ttl10)" --ttl 10s -- true
expect_line "--ttl 3s alone" 0 "dblock: --kill-after 0s" dblock -v run "$(key ttl3)" --ttl 3s -- true
expect_line "--ttl 1min keeps the 5s default" 0 "dblock: --kill-after 5s" dblock -v run "$(key ttl60)" --ttl 1min -- true
expect_line "explicitly incompatible pair" 64 \
  "dblock: --ttl 10s is too short for --kill-after 5s: the lease must cover a renew interval (ttl/3) of retries, the grace and a 1s margin; use --ttl 18s or more, or --kill-after 2s or less" \
  dblock run k --ttl 10s --kill-after 5s -- true
expect_line "ttl below the floor" 64 \
  "dblock: --ttl 2s is too short: use --ttl 3s or more (a renew interval, ttl/3, must cover a 1s margin)" \
  dblock run k --ttl 2s -- true

# --max-hold 0 is no limit, as timeout 0.
assert_status "--max-hold 0 runs to completion" 7 dblock run "$(key maxhold0)" --max-hold 0 -- sh -c 'sleep 1; exit 7'
assert_eq "--max-hold 0 outcome in history" "7" "$(history_field "$(key maxhold0)" runs.0.exit_code)"

# systemd.time(7) spans.
assert_status "--ttl 10min" 0 dblock run "$(key span1)" --ttl 10min -- true
assert_status "--ttl '1h 30min'" 0 dblock run "$(key span2)" --ttl '1h 30min' -- true
assert_status "-w 2sec" 0 dblock run "$(key span3)" -w 2sec -- true
assert_status "--min-hold 500us" 0 dblock run "$(key span4)" --min-hold 500us -- true
expect_line "bad span names the forms" 64 \
  "dblock: --ttl: invalid duration '10mins': unknown unit 'mins' (use e.g. 250ms, 30s, 5m, 10min, 1h30m, \"1h 30min\", 2d or a number of seconds)" \
  dblock run k --ttl 10mins -- true


# A typo inside a section, or a misspelt section, gets the file, the line and the closest name.
printf '# run defaults\n[run]\ntll = "5s"\n' >"$conf"
expect_line "unknown key in a section" 78 \
  "dblock: config file $conf line 3: unknown key 'tll' in section [run] (did you mean 'ttl'?)" \
  dblock --config "$conf" run "$(key section2)" -- true
printf '\n[rnu]\nttl = "5s"\n' >"$conf"
expect_line "misspelt section" 78 \
  "dblock: config file $conf line 2: unknown section [rnu] (did you mean [run]?)" \
  dblock --config "$conf" run "$(key section3)" -- true
printf '[run]\nstrategy = "lease"\n' >"$conf"
expect_line "global option in a section" 78 \
  "dblock: config file $conf line 2: unknown key 'strategy' in section [run] ('strategy' is a global option: put it above every section)" \
  dblock --config "$conf" run "$(key section4)" -- true

# -o takes one word, as in util-linux: the key after it stays a key.
assert_status "status -o KEY,STATE KEY" 0 dblock status -o KEY,STATE never-run-key >"$out" 2>"$err"
check "status -o printed the key" grep -q "^never-run-key *free" "$out"
assert_status "history -o KEY,OUTCOME KEY" 0 dblock history -o KEY,OUTCOME "$(key span1)" >"$out" 2>"$err"
check "history -o read the key" grep -q "$(key span1) *ok" "$out"
# A never-run key's TOKEN is 0 in the table, as in --json.
assert_eq "status TOKEN of a never-run key" "0" "$(dblock status -o TOKEN -n never-run-key | tr -d ' ')"

# Options in the wrong place, or misspelt: where they belong, or the closest name.
expect_line "subcommand option before the subcommand" 64 \
  "dblock: '-E' is an option of 'run': put it after 'dblock run'" dblock -q -E 0 run k -- true
expect_line "option of another subcommand" 64 \
  "dblock: '--ttl' is not an option of 'status' (it is one of 'run', 'acquire', 'renew')" dblock status --ttl 5s
expect_line "misspelt option" 64 "dblock: unknown option '--tll' (did you mean '--ttl', an option of 'run'?)" \
  dblock run k --tll 5s -- true
expect_line "misspelt option before the subcommand" 64 \
  "dblock: unknown option '--tll' (did you mean '--ttl', an option of 'run'?)" dblock --tll 5s run k -- true
expect_line "short subcommand typo" 64 "dblock: unknown subcommand 'rn' (did you mean 'run'?)" dblock rn k -- true

# An error about one key names it: a farm's log lines tell which job failed.
expect_line "error names the key" 78 \
  "dblock: 'nightly-report': the directory $E2E_TMP/none of the SQLite database $E2E_TMP/none/x.db does not exist (create it, or fix the DSN)" \
  dblock -d "sqlite:$E2E_TMP/none/x.db" run nightly-report -- true
expect_line "acquire's error names the key" 78 \
  "dblock: 'nightly-report': the directory $E2E_TMP/none of the SQLite database $E2E_TMP/none/x.db does not exist (create it, or fix the DSN)" \
  dblock -d "sqlite:$E2E_TMP/none/x.db" acquire nightly-report
# status only filters by its keys: its error is about the database.
expect_line "status error as it was" 78 \
  "dblock: the directory $E2E_TMP/none of the SQLite database $E2E_TMP/none/x.db does not exist (create it, or fix the DSN)" \
  dblock -d "sqlite:$E2E_TMP/none/x.db" status nightly-report

# A server that refuses the connection: both servers' lines read alike ("cannot connect to DSN:
# the client library's reason", no password), and libpq's two lines keep their full stop.
# Port 1 of 127.0.0.1: nothing listens there.
expect_line "postgres: refused connection" 69 \
  "dblock: 'k': cannot connect to postgres://u@127.0.0.1:1/db: connection to server at \"127.0.0.1\", port 1 failed: Connection refused. Is the server running on that host and accepting TCP/IP connections?" \
  dblock -d "postgres://u@127.0.0.1:1/db" run --overload-retry 0 k -- true
if grep -q "^dblock: 'k': cannot connect to mysql://u@127.0.0.1:1/db: Can't connect to server on '127.0.0.1' ([0-9]*) (errno 2002)$" \
  <(dblock -d "mysql://u@127.0.0.1:1/db" run --overload-retry 0 k -- true 2>&1); then
  pass "mysql: refused connection, worded as postgres"
else
  fail "mysql: refused connection, worded as postgres: $(dblock -d "mysql://u@127.0.0.1:1/db" run k -- true 2>&1)"
fi

finish
