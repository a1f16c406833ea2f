/* pg_floor COMMAND [ARG...]: the least work a libpq-based lease run can do, as a reference line
 * for the bench's servers section (scripts/bench/servers.sh), what sqlite_floor.c is for SQLite.
 *
 * It connects with the DSN in $PG_FLOOR_DSN (the environment: ps shows arguments) and libpq's
 * defaults, as `dblock run` does, runs one statement, a durable upsert that takes the key and
 * bumps its token (the one write a lease's fencing token needs: a session advisory lock would
 * write nothing), and execs the command with the connection still open. No release, no
 * goodbye, no fork, no guard, no history, no option parsing, no error messages: not a lock
 * anyone should use (the key is never freed), only a measure of what libpq's start-up, the
 * server's connection set-up, authentication and one durable commit cost on this machine.
 * Exit: 69 when the connection or the statement fails, else the command's status.
 */
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char* const upsert =
    "INSERT INTO dblock_bench_pg_floor AS f VALUES ('k', 'me', 1) "
    "ON CONFLICT (k) DO UPDATE SET holder = 'me', token = f.token + 1 RETURNING token";

int main(int argc, char** argv) {
  if (argc < 2) return 64;
  const char* dsn = getenv("PG_FLOOR_DSN");
  PGconn* conn = PQconnectdb(dsn ? dsn : "");
  if (PQstatus(conn) != CONNECTION_OK) return 69;
  PGresult* r = PQexec(conn, upsert);
  const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  if (state && strcmp(state, "42P01") == 0) {  /* the first run of a bench: no table yet */
    PQclear(PQexec(conn, "CREATE TABLE IF NOT EXISTS dblock_bench_pg_floor (k text PRIMARY KEY, holder text, token bigint)"));
    r = PQexec(conn, upsert);
  }
  if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) return 69;
  execvp(argv[1], argv + 1);
  return 127;
}
