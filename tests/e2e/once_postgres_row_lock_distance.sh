#!/usr/bin/env bash
# A row-lock run (for-update, txn-insert) 10 ms from its PostgreSQL server (scripts/bench's delay
# proxy, counted by tests/e2e/postgres_wire_count.py in front of it): its two connections (the
# holder's and the autocommit one that numbers the token) are set up side by side, not one
# after the other, so the run waits for one set-up (TCP, authentication: several round trips),
# not two (dblock(1), NOTES "Round trips"). Then the holder's lock goes out while the other
# connection reads the failover record: both travel in one round trip, the holder's sent before
# the record's answer came. The run still exits 0 and writes its history row.
source "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || skip_or_fail "no python3 for the proxies"
target_port=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.urlsplit(sys.argv[1]).port or 5432)' "$DBLOCK_DSN")
python3 "$DBLOCK_SOURCE_DIR/scripts/bench/delay_proxy.py" --target-port "$target_port" --delay-ms 5 \
  --port-file "$E2E_TMP/delay.port" --lifetime 120 >/dev/null &
remember_pid $!
wait_for 10 test -s "$E2E_TMP/delay.port" || { fail "the delay proxy did not start"; finish; }
python3 "$DBLOCK_SOURCE_DIR/tests/e2e/postgres_wire_count.py" --target-port "$(cat "$E2E_TMP/delay.port")" \
  --port-file "$E2E_TMP/proxy.port" --log "$E2E_TMP/wire.log" --lifetime 120 &
remember_pid $!
wait_for 10 test -s "$E2E_TMP/proxy.port" || { fail "the counting proxy did not start"; finish; }
far_dsn=$(plain_dsn_via "$(cat "$E2E_TMP/proxy.port")")

dblock init >/dev/null || fail "init"
for s in for-update txn-insert; do
  k=$(key "far-$s")
  dblock -s "$s" run "$k" -- true || fail "$s: warm-up run"
  : >"$E2E_TMP/wire.log"
  DBLOCK_DSN=$far_dsn dblock -s "$s" run "$k" -- true
  assert_eq "$s: the run 10 ms away exits 0" 0 "$?"
  # eval: the count is taken again on each try (the proxy logs a connection a moment after the
  # run's exit); a plain "$(...)" argument would be counted once, before the loop.
  wait_for 10 eval '[ "$(grep -c . "$E2E_TMP/wire.log")" -ge 2 ]' || fail "$s: the proxy did not log both connections"
  # connections, and whether the later one was accepted before the earlier one was set up.
  read -r conns overlap <<<"$(python3 -c '
import json, sys
rows = sorted((json.loads(l) for l in open(sys.argv[1]) if l.strip()), key=lambda r: r["accepted"])
rows = [r for r in rows if not r["cancel"]]
overlap = len(rows) == 2 and rows[0]["ready_at"] is not None and rows[1]["accepted"] < rows[0]["ready_at"]
print(len(rows), "yes" if overlap else "no (%s)" % [(round(r["accepted"], 3), r["ready_at"] and round(r["ready_at"], 3)) for r in rows])' "$E2E_TMP/wire.log")"
  assert_eq "$s: two connections" 2 "$conns"
  assert_eq "$s: the second connection's set-up started before the first's ended" yes "$overlap"
  # The holder's connection is the one that locks or inserts the claims row; the other's first
  # statement is the failover record's read.
  assert_eq "$s: the holder's lock was sent before the failover record's read was answered" yes "$(python3 -c '
import json, sys
rows = [r for r in (json.loads(l) for l in open(sys.argv[1]) if l.strip()) if not r["cancel"]]
holder = [r for r in rows if any("claims" in q and ("FOR UPDATE" in q or "pg_try_advisory_xact_lock" in q) for q in r["queries"])]
book = [r for r in rows if r not in holder]
if len(holder) != 1 or len(book) != 1 or not holder[0]["turns"] or not book[0]["turns"]:
    print("no: the connections are not told apart")
else:
    lock, read = holder[0]["turns"][0], book[0]["turns"][0]
    print("yes" if read[1] is not None and lock[0] < read[1] else
          "no (lock sent %.1f ms after the read, which was answered %s ms after)" %
          ((lock[0] - read[0]) * 1000, read[1] and round((read[1] - read[0]) * 1000, 1)))' "$E2E_TMP/wire.log")"
  assert_eq "$s: both runs are in the history" 2 "$(history_field "$k" runs.#)"
done
finish
