/* sqlite_floor DB COMMAND [ARG...]: the least work a durable SQLite lock run can do, as a
 * reference line for the bench's start-up section (scripts/bench/startup.sh).
 *
 * It makes the same writes as `dblock run` on SQLite and nothing else: open the file (WAL, the
 * WAL kept on close and reopened without O_CREAT, as dblock does, so no directory fsync; a
 * checkpoint every 128 pages, as dblock), one durable commit (synchronous=FULL) that takes the
 * key and bumps its token, fork and exec the command, wait, one commit at synchronous=NORMAL
 * that frees the key (a lost release leaves a lease that expires by itself). One fdatasync, as
 * dblock.
 * No option parsing, no guard process, no heartbeat, no history, no error messages: not a
 * lock anyone should use, only a measure of what the disk and the kernel cost on this machine.
 */
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

static sqlite3_vfs* real_vfs;

/* Open an existing WAL without SQLITE_OPEN_CREATE: SQLite fsyncs the directory the first time
 * it syncs a journal or WAL it opened with that flag. */
static int open_keeping_wal(sqlite3_vfs* vfs, sqlite3_filename name, sqlite3_file* file, int flags,
                            int* out_flags) {
  (void)vfs;
  if (name && (flags & SQLITE_OPEN_WAL) && (flags & SQLITE_OPEN_CREATE) &&
      real_vfs->xOpen(real_vfs, name, file, flags & ~SQLITE_OPEN_CREATE, out_flags) == SQLITE_OK)
    return SQLITE_OK;
  return real_vfs->xOpen(real_vfs, name, file, flags, out_flags);
}

int main(int argc, char** argv) {
  if (argc < 3) return 64;
  static sqlite3_vfs vfs;
  real_vfs = sqlite3_vfs_find(0);
  vfs = *real_vfs;
  vfs.zName = "floor-unix";
  vfs.xOpen = open_keeping_wal;
  sqlite3_vfs_register(&vfs, 0);

  sqlite3* db;
  if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, "floor-unix") != SQLITE_OK)
    return 70;
  sqlite3_busy_timeout(db, 5000);
  sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int*)0);
  if (sqlite3_exec(db,
                   "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA wal_autocheckpoint=128;"
                   "CREATE TABLE IF NOT EXISTS floor(k TEXT PRIMARY KEY, holder TEXT, token INTEGER)",
                   0, 0, 0) != SQLITE_OK)
    return 70;
  if (sqlite3_exec(db,
                   "INSERT INTO floor VALUES ('k', 'me', 1) "
                   "ON CONFLICT (k) DO UPDATE SET holder = 'me', token = token + 1 WHERE holder IS NULL",
                   0, 0, 0) != SQLITE_OK || sqlite3_changes(db) != 1)
    return 75;
  pid_t pid = fork();
  if (pid < 0) return 71;
  if (pid == 0) {
    execvp(argv[2], argv + 2);
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return 71;
  if (sqlite3_exec(db, "PRAGMA synchronous=NORMAL; UPDATE floor SET holder = NULL WHERE k = 'k'", 0, 0, 0) != SQLITE_OK) return 70;
  sqlite3_close(db);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
