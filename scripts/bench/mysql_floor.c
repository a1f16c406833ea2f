/* mysql_floor [-r] COMMAND [ARG...]: pg_floor.c's counterpart on MariaDB Connector/C, the least
 * work a libmariadb-based lease run can do, as a reference line for the bench's distance
 * section (scripts/bench/distance.sh).
 *
 * It reads the server and the credentials from the option file named by $MYSQL_FLOOR_CNF (its
 * [client] group; the environment and a mode-600 file: ps shows arguments), or, when
 * $MYSQL_FLOOR_PORT is set (the bench's delay proxy), 127.0.0.1 on that port; connects with the connector's defaults,
 * as `dblock run` does, and runs one statement in autocommit: a durable upsert that takes the
 * key and bumps its token, handed back in the OK packet by LAST_INSERT_ID(expr) (no second
 * round trip to read it, no RETURNING with ON DUPLICATE KEY UPDATE). Then it execs the command
 * with the connection still open: no release, no goodbye, no fork, no guard, no history.
 *
 * With -r, the same work plus a release: the take only when the key is free (another key than
 * without -r, which never frees its own), fork and exec the command, wait for it, one
 * statement that frees the key (awaited), and a goodbye (COM_QUIT). Exit 75 when the key is
 * held. And, as `dblock run` does (its --overload-retry, 5 s), a connection the server turned
 * away (a storm beyond max_connections) is tried again for 5 s, after a fully jittered backoff
 * from 100 ms doubling to 1 s, as pg_floor.c does.
 * Exit: 69 when the connection or a statement fails, else the command's status.
 */
#include <mysql.h>
#include <mysqld_error.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char* const upsert =
    "INSERT INTO dblock_bench_my_floor VALUES ('k', 'me', 1) "
    "ON DUPLICATE KEY UPDATE holder = 'me', token = LAST_INSERT_ID(token + 1)";
/* MySQL assigns left to right: the token is bumped while holder is still the old one. */
static const char* const take =
    "INSERT INTO dblock_bench_my_floor VALUES ('r', 'me', 1) "
    "ON DUPLICATE KEY UPDATE token = IF(holder IS NULL, LAST_INSERT_ID(token + 1), token), "
    "holder = IF(holder IS NULL, 'me', holder)";
static const char* const release = "UPDATE dblock_bench_my_floor SET holder = NULL WHERE k = 'r' AND holder = 'me'";

static long long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Connects; with `retry`, again while the server turns it away, as dblock run does. */
static MYSQL* connect_floor(const char* cnf, const char* port, int retry) {
  long long give_up = now_ms() + 5000, backoff = 100;
  srand((unsigned)getpid());
  for (;;) {
    MYSQL* m = mysql_init(NULL);
    if (!m) return NULL;
    if (cnf && mysql_options(m, MYSQL_READ_DEFAULT_FILE, cnf) != 0) return NULL;
    if (mysql_real_connect(m, port ? "127.0.0.1" : NULL, NULL, NULL, NULL, port ? (unsigned)atoi(port) : 0, NULL, 0))
      return m;
    mysql_close(m);
    if (!retry || now_ms() >= give_up) return NULL;
    usleep((useconds_t)(rand() % (backoff + 1)) * 1000);
    backoff = backoff * 2 > 1000 ? 1000 : backoff * 2;
  }
}

int main(int argc, char** argv) {
  int with_release = argc > 1 && strcmp(argv[1], "-r") == 0;
  argv += with_release;
  argc -= with_release;
  if (argc < 2) return 64;
  MYSQL* m = connect_floor(getenv("MYSQL_FLOOR_CNF"), getenv("MYSQL_FLOOR_PORT"), with_release);
  if (!m) return 69;
  const char* sql = with_release ? take : upsert;
  if (mysql_query(m, sql) != 0) {
    if (mysql_errno(m) != ER_NO_SUCH_TABLE) return 69;  /* the first run of a bench: no table yet */
    if (mysql_query(m, "CREATE TABLE IF NOT EXISTS dblock_bench_my_floor "
                       "(k VARCHAR(64) PRIMARY KEY, holder VARCHAR(64), token BIGINT) ENGINE=InnoDB") != 0 ||
        mysql_query(m, sql) != 0)
      return 69;
  }
  /* 1: inserted, 2: updated (taken), 0: left as it was (held). */
  if (mysql_affected_rows(m) == 0) return with_release ? 75 : 69;
  if (!with_release) {
    execvp(argv[1], argv + 1);
    return 127;
  }
  pid_t pid = fork();
  if (pid < 0) return 71;
  if (pid == 0) {
    execvp(argv[1], argv + 1);
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return 71;
  if (mysql_query(m, release) != 0) return 69;
  mysql_close(m);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
