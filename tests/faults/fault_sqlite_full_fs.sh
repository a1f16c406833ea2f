#!/usr/bin/env bash
# SQLite on a full file system: the database lives on a small tmpfs that a filler file fills.
# Every command that needs the database then fails with exit 69 and says the disk is full
# (not a bare "disk I/O error"); a release that cannot be written leaves the lease to expire;
# once space is freed the file passes integrity_check and tokens keep increasing.
source "$(dirname "$0")/lib.sh"

# Mounting needs root (and CAP_SYS_ADMIN): without them the scenario cannot run at all.
[ "$(id -u)" -eq 0 ] || skip_or_fail "mounting a tmpfs needs root"
command -v sqlite3 >/dev/null || skip_or_fail "the sqlite3 command-line tool is missing"

mnt=$E2E_TMP/fs
mkdir -p "$mnt"
mount -t tmpfs -o size=2m,mode=0755 dblock-full-fs "$mnt" || skip_or_fail "cannot mount a tmpfs on $mnt"
unmount() {
  # Everything this script started is gone before the unmount (e2e_cleanup kills them), but
  # e2e_cleanup also removes the temp dir, so the file system has to go first: kill, then umount.
  local pid
  for pid in $(jobs -p); do kill -KILL "$pid" 2>/dev/null; done
  wait 2>/dev/null
  umount "$mnt" 2>/dev/null || umount -l "$mnt"
  e2e_cleanup
}
trap unmount EXIT

export DBLOCK_DSN="sqlite:$mnt/dblock.db"
db=$mnt/dblock.db
log=$E2E_TMP/oracle.log
k=$(key full)

fill() { dd if=/dev/zero of="$mnt/filler" bs=64k 2>/dev/null; sync; }
free_space() { rm -f "$mnt/filler"; }

# expect_full NAME COMMAND...: exit 69, and stderr says the file system is full.
expect_full() {
  local name=$1 st=0
  shift
  "$@" >"$E2E_TMP/out" 2>"$E2E_TMP/err" || st=$?
  assert_eq "$name (exit status)" 69 "$st"
  if grep -q "file system holding the database is full" "$E2E_TMP/err"; then
    pass "$name: the message names the full disk"
  else
    fail "$name: the message does not name the full disk: $(cat "$E2E_TMP/err")"
  fi
}

assert_status "a run before the disk fills" 0 dblock run "$k" -- "$ORACLE_JOB" "$log" 0.1
runs=1

fill
avail=$(df --output=avail "$mnt" | tail -1 | tr -d ' ')
assert_eq "the file system is full" 0 "$avail"
expect_full "run on a full disk" dblock run "$k" -- "$ORACLE_JOB" "$log" 0.1
expect_full "acquire on a full disk" dblock acquire "$k"
assert_status "history on a full disk still reads (the -wal and -shm already exist)" 0 dblock history "$k"
free_space

# An acquired lease whose release cannot be written.
token=$(dblock acquire "$k" --ttl 1m)
assert_eq "acquire with space again" 2 "$token"
fill
expect_full "release on a full disk" dblock release "$k" --token "$token"
free_space
assert_status "status: still held after the failed release" 0 dblock status -q "$k"
assert_status "release once there is space" 0 dblock release "$k" --token "$token"

# The disk fills while the command runs: the release and its history row cannot be written.
# The command's own status is passed through; stderr says why the release failed, and the
# lease is left to expire (6 s), after which the next run takes over.
dblock run --ttl 6s --kill-after 1s "$k" -- sh -c "\"\$0\" \"\$@\" && dd if=/dev/zero of='$mnt/filler' bs=64k 2>/dev/null; true" \
  "$ORACLE_JOB" "$log" 0.1 2>"$E2E_TMP/err"
runs=$((runs + 1))
if grep -q "could not release.*file system holding the database is full" "$E2E_TMP/err"; then
  pass "a release that failed mid-run names the full disk"
else
  fail "a release that failed mid-run does not name the full disk: $(cat "$E2E_TMP/err")"
fi
free_space
assert_status "the unreleased lease is still held" 0 dblock status -q "$k"

# A waiter on a full disk makes the wake file its waiters sleep on (<database>-wake): a file
# whose pages cannot be allocated. It must find that out when it makes the file, and wait by
# polling; a sparse file (ftruncate) mapped and touched killed it with SIGBUS (exit 135).
k2=$(key full-waiter)
token2=$(dblock acquire "$k2" --ttl 1m)
rm -f "$db-wake"
fill
st=0
dblock run -w 1 "$k2" -- true 2>"$E2E_TMP/err" || st=$?
case $st in
  69 | 75) pass "a waiter on a full disk, no wake file yet: exit $st, no crash" ;;
  *) fail "a waiter on a full disk, no wake file yet: exit $st (135 is SIGBUS): $(cat "$E2E_TMP/err")" ;;
esac
free_space
assert_status "the waiter's key is released once there is space" 0 dblock release "$k2" --token "$token2"

assert_eq "integrity_check after the disk was full" ok "$(sqlite3 "$db" 'PRAGMA integrity_check')"
for i in 1 2 3; do
  assert_status "run $i after space was freed" 0 dblock run -w 20 "$k" -- "$ORACLE_JOB" "$log" 0.1
  runs=$((runs + 1))
done
oracle_check "runs around the full disk: no overlap, tokens increase" "$log" "$runs"
assert_eq "integrity_check at the end" ok "$(sqlite3 "$db" 'PRAGMA integrity_check')"
assert_eq "the failed run left no history row, the others did" 4 \
  "$(sqlite3 "$db" "SELECT count(*) FROM \"${DBLOCK_TABLE_PREFIX}runs\" WHERE name = '$k'")"
finish
