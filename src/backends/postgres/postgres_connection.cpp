#include "backends/postgres/postgres_connection.hpp"

#include "backends/common/identifiers.hpp"

#include <fcntl.h>
#include <poll.h>

#include <cerrno>
#include <charconv>
#include <thread>

#include "backends/postgres/postgres_error.hpp"
#include "core/clock.hpp"

namespace dblock::postgres {
namespace {

struct ConninfoDeleter {
  void operator()(PQconninfoOption* o) const { PQconninfoFree(o); }
};

// Waits until the socket is ready for `events` or the deadline passes; false on timeout.
bool wait_socket(int fd, short events, Millis deadline, short* revents) {
  for (;;) {
    Millis left = deadline - boottime_now();
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 60'000)));
    if (n > 0) {
      *revents = p.revents;
      return true;
    }
    if (n < 0 && errno != EINTR) {
      *revents = POLLERR;
      return true;  // let libpq report the broken socket
    }
  }
}

// Each connection's idle limits, in the one statement its setup already runs. A server's own
// idle killers must not drop a session while a long job runs, so a bookkeeping connection sets
// them to 0; a lock holder gets the short limit from its TTL, which its renewals never reach
// but which ends the session (and frees the lock) of a holder whose network went dark, plus
// server-side keepalives and a TCP user timeout within the same limit for a real partition
// (a userspace proxy's kernel would answer keepalives: the idle limits cover that case).
// set_config through pg_settings skips what an older server lacks (idle_session_timeout
// before 14, tcp_user_timeout before 12); a NULL value leaves the server's setting alone.
constexpr std::string_view session_setup =
    "SELECT set_config(s.name, v.value, false) FROM pg_settings s JOIN (VALUES "
    "('idle_session_timeout', $1::text), ('idle_in_transaction_session_timeout', $1::text), "
    "('tcp_user_timeout', $2::text), ('tcp_keepalives_idle', $3::text), ('tcp_keepalives_interval', $4::text), "
    "('tcp_keepalives_count', $5::text)) AS v(name, value) USING (name) WHERE v.value IS NOT NULL";

Params session_settings(ConnectionRole role, Millis idle_limit) {
  if (role != ConnectionRole::lock_holder || idle_limit.count() <= 0) return {"0", Param(), Param(), Param(), Param()};
  const std::int64_t limit_s = std::max<std::int64_t>((idle_limit.count() + 999) / 1000, 1);
  // Three unanswered probes after a third of the limit, a ninth apart: dead by 2/3 of it.
  const std::string limit_ms = std::to_string(limit_s * 1000);
  return {limit_ms, limit_ms, std::to_string(std::max<std::int64_t>(limit_s / 3, 1)),
          std::to_string(std::max<std::int64_t>(limit_s / 9, 1)), "3"};
}

void ignore_notice(void*, const char*) {}

}  // namespace

std::string QueryResult::text(int row, int col) const { return PQgetvalue(r_.get(), row, col); }

std::int64_t QueryResult::int64(int row, int col) const {
  const char* v = PQgetvalue(r_.get(), row, col);
  std::int64_t out = 0;
  std::from_chars(v, v + std::char_traits<char>::length(v), out);
  return out;
}

std::optional<std::int64_t> QueryResult::opt_int64(int row, int col) const {
  if (is_null(row, col)) return std::nullopt;
  return int64(row, col);
}

bool QueryResult::boolean(int row, int col) const { return !is_null(row, col) && PQgetvalue(r_.get(), row, col)[0] == 't'; }

long QueryResult::affected() const {
  const char* n = r_ ? PQcmdTuples(r_.get()) : "";
  return *n ? std::strtol(n, nullptr, 10) : 0;
}

std::string quote_ident(std::string_view name) { return quote_identifier(name, '"'); }

std::string ms(std::string_view expr) {
  return "floor(extract(epoch FROM " + std::string(expr) + ") * 1000)::bigint";
}

Result<std::unique_ptr<Connection>> Connection::open(const Dsn& dsn, const BackendOptions& options, ConnectionRole role) {
  std::unique_ptr<Connection> conn(new Connection(dsn, options, role));
  if (auto ok = conn->connect(); !ok) return std::unexpected(ok.error());
  return conn;
}

Connection::~Connection() = default;

Result<void> Connection::connect() {
  conn_.reset();
  // libpq's own parser validates the URI (so sslmode, host=/socket dir, passfile... all work).
  char* err = nullptr;
  std::unique_ptr<PQconninfoOption, ConninfoDeleter> parsed(PQconninfoParse(dsn_.text.c_str(), &err));
  if (!parsed) {
    std::string why = err ? one_line(err) : "out of memory";
    if (err) PQfreemem(err);
    return invalid_dsn(dsn_, why);  // hides the password should libpq quote it
  }
  auto user_set = [&](std::string_view keyword) {
    for (auto* o = parsed.get(); o->keyword; ++o)
      if (keyword == o->keyword && o->val && *o->val) return true;
    return false;
  };
  // libpq rounds connect_timeout to whole seconds and treats 1 as 2.
  auto secs = std::max<std::int64_t>(2, (options_.connect_timeout.count() + 999) / 1000);
  std::vector<std::pair<const char*, std::string>> defaults{
      {"application_name", "dblock"},
      {"connect_timeout", std::to_string(secs)},
      // A vanished server (cable, crash without RST) is noticed instead of hanging forever.
      {"keepalives", "1"},
      {"keepalives_idle", "10"},
      {"keepalives_interval", "2"},
      {"keepalives_count", "3"},
      {"tcp_user_timeout", std::to_string(std::max<std::int64_t>(1000, options_.io_timeout.count()))},
  };
  std::vector<const char*> keys{"dbname"}, values{dsn_.text.c_str()};
  for (const auto& [k, v] : defaults)
    if (!user_set(k)) {
      keys.push_back(k);
      values.push_back(v.c_str());
    }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  if (auto ok = start_connection(keys, values); !ok) return ok;
  PQsetNoticeProcessor(conn_.get(), ignore_notice, nullptr);  // "already exists, skipping" is no news for cron mail
  ::fcntl(PQsocket(conn_.get()), F_SETFD, FD_CLOEXEC);        // the command under `run` must not inherit it
  PQsetnonblocking(conn_.get(), 1);
  if (auto r = exec(session_setup, session_settings(role_, options_.session_idle_limit)); !r)
    return std::unexpected(r.error());
  if (!channel_.empty())
    if (auto r = exec("LISTEN " + quote_ident(channel_)); !r) return std::unexpected(r.error());
  return {};
}

// The nonblocking connect, so the server's refusal keeps its SQLSTATE (PQERRORS_VERBOSE
// while connecting, see connect_error) and the whole attempt ends by connect_timeout.
Result<void> Connection::start_connection(const std::vector<const char*>& keys, const std::vector<const char*>& values) {
  conn_.reset(PQconnectStartParams(keys.data(), values.data(), /*expand_dbname=*/1));
  ConnectProgress progress;
  auto failed = [&] {
    Error e = connect_error(conn_.get(), dsn_.redacted, progress);
    conn_.reset();
    return std::unexpected(e);
  };
  if (!conn_ || PQstatus(conn_.get()) == CONNECTION_BAD) return failed();
  PGconn* c = conn_.get();
  PQsetErrorVerbosity(c, PQERRORS_VERBOSE);
  std::unique_ptr<PQconninfoOption, ConninfoDeleter> used(PQconninfo(c));
  for (auto* o = used.get(); o && o->keyword; ++o)
    if (std::string_view(o->keyword) == "sslmode" && o->val)
      progress.ssl_required = std::string_view(o->val) == "require" || std::string_view(o->val).starts_with("verify");
  const Millis deadline = boottime_now() + options_.connect_timeout;
  PostgresPollingStatusType state = PGRES_POLLING_WRITING;
  while (state != PGRES_POLLING_OK) {
    if (state == PGRES_POLLING_FAILED) return failed();
    short revents = 0;
    if (!wait_socket(PQsocket(c), state == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline, &revents)) {
      conn_.reset();
      return fail(ErrorKind::connection, "cannot connect to " + dsn_.redacted + ": no answer within the connect timeout");
    }
    state = PQconnectPoll(c);
    const ConnStatusType st = PQstatus(c);
    if (st != CONNECTION_STARTED && st != CONNECTION_NEEDED && st != CONNECTION_BAD) progress.reached_server = true;
  }
  PQsetErrorVerbosity(c, PQERRORS_DEFAULT);
  return {};
}

bool Connection::is_open() const {
  return conn_ && PQstatus(conn_.get()) == CONNECTION_OK;
}

bool Connection::in_transaction() const {
  return is_open() && PQtransactionStatus(conn_.get()) == PQTRANS_INTRANS;
}

Result<void> Connection::reconnect() { return connect(); }

void Connection::close() {
  conn_.reset();
}

int Connection::socket() const {
  return is_open() ? PQsocket(conn_.get()) : -1;
}

int Connection::backend_pid() const {
  return is_open() ? PQbackendPID(conn_.get()) : 0;
}

Result<void> Connection::listen(const std::string& channel) {
  if (channel == channel_) return {};
  if (auto r = exec("UNLISTEN *; LISTEN " + quote_ident(channel)); !r) return std::unexpected(r.error());
  channel_ = channel;
  return {};
}

Result<void> Connection::unlisten() {
  if (channel_.empty()) return {};
  channel_.clear();
  if (auto r = exec("UNLISTEN *"); !r) return std::unexpected(r.error());
  return {};
}

bool Connection::drain_notifications() {
  if (!is_open()) return false;
  PQconsumeInput(conn_.get());
  bool any = false;
  while (PGnotify* n = PQnotifies(conn_.get())) {
    any = true;
    PQfreemem(n);
  }
  return any;
}

Error Connection::broken(std::string_view doing) {
  std::string text = conn_ ? one_line(PQerrorMessage(conn_.get())) : "connection closed";
  return Error{ErrorKind::connection, "postgres " + dsn_.redacted + ": " + std::string(doing) + ": " + text};
}

Error Connection::timed_out() {
  // PQcancel opens a blocking connection with no timeout of its own: a server that vanished
  // would hang us, so it runs on a detached thread while we close our side at once.
  if (PGcancel* cancel = PQgetCancel(conn_.get())) {
    std::thread([cancel] {
      char buf[256];
      PQcancel(cancel, buf, sizeof buf);
      PQfreeCancel(cancel);
    }).detach();
  }
  conn_.reset();
  return Error{ErrorKind::connection, "postgres " + dsn_.redacted + ": no answer within the I/O timeout; connection closed"};
}

Result<QueryResult> Connection::exec(std::string_view sql, const Params& params, Millis extra) {
  if (!is_open()) return std::unexpected(broken("not connected"));
  const Millis deadline = boottime_now() + options_.io_timeout + extra;
  PGconn* c = conn_.get();
  const std::string text(sql);
  int sent = 0;
  if (params.empty()) {
    sent = PQsendQuery(c, text.c_str());
  } else {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
    sent = PQsendQueryParams(c, text.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr, 0);
  }
  if (!sent) return std::unexpected(broken("sending a statement"));
  const int fd = PQsocket(c);
  short revents = 0;
  for (;;) {
    int f = PQflush(c);
    if (f == 0) break;
    if (f < 0) return std::unexpected(broken("sending a statement"));
    if (!wait_socket(fd, POLLOUT | POLLIN, deadline, &revents)) return std::unexpected(timed_out());
    if ((revents & POLLIN) && !PQconsumeInput(c)) return std::unexpected(broken("reading"));
  }
  QueryResult last, error;
  for (;;) {
    while (PQisBusy(c)) {
      if (!wait_socket(fd, POLLIN, deadline, &revents)) return std::unexpected(timed_out());
      if (!PQconsumeInput(c)) return std::unexpected(broken("reading"));
    }
    PGresult* r = PQgetResult(c);
    if (!r) break;
    auto status = PQresultStatus(r);
    QueryResult owned(r);
    if (status == PGRES_FATAL_ERROR || status == PGRES_BAD_RESPONSE || status == PGRES_NONFATAL_ERROR) {
      if (!error) error = owned;
    } else {
      last = owned;
    }
    if (PQstatus(c) == CONNECTION_BAD) break;
  }
  if (error) {
    return std::unexpected(statement_error(error.get(), c, dsn_.redacted));
  }
  if (PQstatus(c) == CONNECTION_BAD) return std::unexpected(broken("connection lost"));
  if (channel_.empty())  // left over from before an UNLISTEN: nobody will read them
    while (PGnotify* n = PQnotifies(c)) PQfreemem(n);
  return last;
}

}  // namespace dblock::postgres
