/* pg_floor [-r] COMMAND [ARG...]: the least work a libpq-based lease run can do, as a reference
 * line for the bench's servers and distance sections (scripts/bench/servers.sh, distance.sh),
 * what sqlite_floor.c is for SQLite.
 *
 * It connects with the DSN in $PG_FLOOR_DSN (the environment: ps shows arguments) and libpq's
 * defaults, as `dblock run` does, runs one statement, a durable upsert that takes the key and
 * bumps its token (the one write a lease's fencing token needs: a session advisory lock would
 * write nothing), and execs the command with the connection still open. No release, no
 * goodbye, no fork, no guard, no history, no option parsing, no error messages: not a lock
 * anyone should use (the key is never freed), only a measure of what libpq's start-up, the
 * server's connection set-up, authentication and one durable commit cost on this machine.
 *
 * With -r, the same work plus a release, what a lock that frees its key must do at the least:
 * the take only when the key is free (another key than without -r, which never frees its own),
 * then fork and exec the command, wait for it, one statement that frees the key (awaited: the
 * release is known to have happened), and a goodbye. Exit 75 when the key is held. And, as
 * `dblock run` does (its --overload-retry, 5 s), a connection the server turned away (a storm
 * beyond max_connections) is tried again for 5 s, after a fully jittered backoff from 100 ms
 * doubling to 1 s: the storm section's floor then does the work its dblock storm does, rather
 * than giving up at the first refusal, and a storm that outlasts the 5 s is a skip (75), as
 * dblock's is: the storm's counts then compare the same verdicts.
 * Exit: 69 when the connection or a statement fails, else the command's status (128 + signal).
 */
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char* const upsert =
    "INSERT INTO dblock_bench_pg_floor AS f VALUES ('k', 'me', 1) "
    "ON CONFLICT (k) DO UPDATE SET holder = 'me', token = f.token + 1 RETURNING token";
static const char* const take =
    "INSERT INTO dblock_bench_pg_floor AS f VALUES ('r', 'me', 1) "
    "ON CONFLICT (k) DO UPDATE SET holder = 'me', token = f.token + 1 WHERE f.holder IS NULL RETURNING token";
static const char* const release = "UPDATE dblock_bench_pg_floor SET holder = NULL WHERE k = 'r' AND holder = 'me'";

static long long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Connects; with `retry`, again while the server turns it away, as dblock run does. */
static PGconn* connect_floor(const char* dsn, int retry) {
  long long give_up = now_ms() + 5000, backoff = 100;
  srand((unsigned)getpid());
  for (;;) {
    PGconn* conn = PQconnectdb(dsn ? dsn : "");
    if (PQstatus(conn) == CONNECTION_OK || !retry || now_ms() >= give_up) return conn;
    PQfinish(conn);
    usleep((useconds_t)(rand() % (backoff + 1)) * 1000);
    backoff = backoff * 2 > 1000 ? 1000 : backoff * 2;
  }
}

int main(int argc, char** argv) {
  int with_release = argc > 1 && strcmp(argv[1], "-r") == 0;
  argv += with_release;
  argc -= with_release;
  if (argc < 2) return 64;
  const char* dsn = getenv("PG_FLOOR_DSN");
  PGconn* conn = connect_floor(dsn, with_release);
  if (PQstatus(conn) != CONNECTION_OK) return with_release ? 75 : 69;  /* -r: turned away for 5 s */
  const char* sql = with_release ? take : upsert;
  PGresult* r = PQexec(conn, sql);
  const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  if (state && strcmp(state, "42P01") == 0) {  /* the first run of a bench: no table yet */
    PQclear(PQexec(conn, "CREATE TABLE IF NOT EXISTS dblock_bench_pg_floor (k text PRIMARY KEY, holder text, token bigint)"));
    r = PQexec(conn, sql);
  }
  if (PQresultStatus(r) != PGRES_TUPLES_OK) return 69;
  if (PQntuples(r) != 1) return with_release ? 75 : 69;
  if (!with_release) {
    execvp(argv[1], argv + 1);
    return 127;
  }
  PQclear(r);
  pid_t pid = fork();
  if (pid < 0) return 71;
  if (pid == 0) {
    execvp(argv[1], argv + 1);
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return 71;
  r = PQexec(conn, release);
  if (PQresultStatus(r) != PGRES_COMMAND_OK) return 69;
  PQclear(r);
  PQfinish(conn);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
