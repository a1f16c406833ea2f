#include "backends/postgres/postgres_connection.hpp"

#include "backends/common/identifiers.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <functional>
#include <limits>
#include <thread>

#include "backends/postgres/postgres_error.hpp"
#include "backends/postgres/postgres_tables.hpp"
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

// Each connection's idle limits travel in the startup packet (libpq's `options`), so setting
// them costs no round trip. A server's own idle killers must not drop a session while a long job
// runs, so a bookkeeping connection sets them to 0; a lock holder gets the short limit from its
// TTL, which its renewals never reach but which ends the session (and frees the lock) of a
// holder whose network went dark, plus server-side keepalives and a TCP user timeout within the
// same limit for a real partition (a userspace proxy's kernel would answer keepalives: the idle
// limits cover that case). `modern`: also the settings PostgreSQL 14 (idle_session_timeout) and
// 12 (tcp_user_timeout) added; an older server refuses unknown ones (42704) and gets the rest.
//
// The server takes at most INT_MAX ms (24.8 days) for the idle limits and the TCP user timeout,
// and the kernel at most 32767 s for the keepalive times: a longer limit (--ttl 13d or more)
// is clamped to those, or, when the clamped idle limit would not even cover a renew interval
// (TTL/3, a sixth of the limit) and so would end a healthy holder, the idle limits are off and
// the keepalives alone find a dark peer.
std::string session_options(ConnectionRole role, Millis idle_limit, bool modern) {
  constexpr std::int64_t max_limit_ms = std::numeric_limits<std::int32_t>::max() / 1000 * 1000;
  constexpr std::int64_t max_keepalive_s = 32767;
  std::vector<std::pair<std::string_view, std::string>> set;
  std::string limit_ms = "0";
  const bool holder = role == ConnectionRole::lock_holder && idle_limit.count() > 0;
  std::int64_t limit_s = 0;
  if (holder) {
    limit_s = std::max<std::int64_t>((idle_limit.count() + 999) / 1000, 1);
    if (limit_s * 1000 <= max_limit_ms)
      limit_ms = std::to_string(limit_s * 1000);
    else if (max_limit_ms * 6 >= limit_s * 1000)
      limit_ms = std::to_string(max_limit_ms);
  }
  if (modern) set.emplace_back("idle_session_timeout", limit_ms);
  set.emplace_back("idle_in_transaction_session_timeout", limit_ms);
  if (holder) {
    // Three unanswered probes after a third of the limit, a ninth apart: dead by 2/3 of it.
    if (modern) set.emplace_back("tcp_user_timeout", std::to_string(std::min(limit_s * 1000, max_limit_ms)));
    set.emplace_back("tcp_keepalives_idle", std::to_string(std::clamp<std::int64_t>(limit_s / 3, 1, max_keepalive_s)));
    set.emplace_back("tcp_keepalives_interval", std::to_string(std::clamp<std::int64_t>(limit_s / 9, 1, max_keepalive_s)));
    set.emplace_back("tcp_keepalives_count", "3");
  }
  std::string out;
  for (const auto& [name, value] : set) {
    if (!out.empty()) out += ' ';
    out += "-c ";
    out += name;
    out += '=';
    out += value;
  }
  return out;
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

std::unique_ptr<Connection> Connection::deferred(const Dsn& dsn, const BackendOptions& options, ConnectionRole role) {
  std::unique_ptr<Connection> conn(new Connection(dsn, options, role));
  conn->deferred_ = true;
  return conn;
}

Result<void> Connection::connect_if_deferred() {
  if (conn_ || !deferred_) return {};
  return connect();
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
  // The DSN's own `options` come first: dblock's idle limits are not the user's to loosen.
  std::string user_options;
  for (auto* o = parsed.get(); o->keyword; ++o)
    if (std::string_view(o->keyword) == "options" && o->val) user_options = o->val;
  for (bool modern : {true, false}) {
    std::string options = session_options(role_, options_.session_idle_limit, modern);
    if (!user_options.empty()) options = user_options + " " + options;
    std::vector<const char*> keys{"dbname", "options"}, values{dsn_.text.c_str(), options.c_str()};
    for (const auto& [k, v] : defaults)
      if (!user_set(k)) {
        keys.push_back(k);
        values.push_back(v.c_str());
      }
    keys.push_back(nullptr);
    values.push_back(nullptr);
    auto ok = start_connection(keys, values);
    if (!ok && modern && ok.error().sqlstate == "42704") continue;  // a server before 14: the older settings
    if (!ok) return ok;
    break;
  }
  PQsetNoticeProcessor(conn_.get(), ignore_notice, nullptr);  // "already exists, skipping" is no news for cron mail
  ::fcntl(PQsocket(conn_.get()), F_SETFD, FD_CLOEXEC);        // the command under `run` must not inherit it
  PQsetnonblocking(conn_.get(), 1);
  if (!channel_.empty())
    if (auto r = exec("LISTEN " + quote_ident(channel_)); !r) return std::unexpected(r.error());
  return {};
}

namespace {

std::vector<std::string> split_commas(std::string_view list) {
  std::vector<std::string> out;
  for (std::size_t start = 0;;) {
    const std::size_t comma = list.find(',', start);
    out.emplace_back(list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

std::string join_commas(const std::vector<std::string>& items, std::size_t from) {
  std::string out;
  for (std::size_t i = from; i < items.size(); ++i) out += (i > from ? "," : "") + items[i];
  return out;
}

// The hosts after the one `c` is trying, as host and port lists ("" when it is the last): a
// multi-host DSN (a failover pair) whose current host never answers goes on to the next, which
// libpq itself does only in its blocking connect.
std::optional<std::pair<std::string, std::string>> hosts_after_current(PGconn* c) {
  std::unique_ptr<PQconninfoOption, ConninfoDeleter> used(PQconninfo(c));
  std::string host_list, port_list;
  for (auto* o = used.get(); o && o->keyword; ++o) {
    if (std::string_view(o->keyword) == "host" && o->val) host_list = o->val;
    if (std::string_view(o->keyword) == "port" && o->val) port_list = o->val;
  }
  const auto hosts = split_commas(host_list);
  auto ports = split_commas(port_list);
  if (hosts.size() < 2) return std::nullopt;
  if (ports.size() == 1) ports.assign(hosts.size(), ports.front());
  if (ports.size() != hosts.size() || !PQhost(c) || !PQport(c)) return std::nullopt;
  for (std::size_t i = 0; i + 1 < hosts.size(); ++i)
    if (hosts[i] == PQhost(c) && ports[i] == PQport(c)) return std::pair{join_commas(hosts, i + 1), join_commas(ports, i + 1)};
  return std::nullopt;
}

std::size_t host_count(PGconn* c) {
  std::unique_ptr<PQconninfoOption, ConninfoDeleter> used(PQconninfo(c));
  for (auto* o = used.get(); o && o->keyword; ++o)
    if (std::string_view(o->keyword) == "host" && o->val) return split_commas(o->val).size();
  return 1;
}

}  // namespace

// The nonblocking connect, so the server's refusal keeps its SQLSTATE (PQERRORS_VERBOSE
// while connecting, see connect_error) and the whole attempt ends by connect_timeout. With
// several hosts, each gets its share of it (at least 2 s) before the next is tried.
Result<void> Connection::start_connection(const std::vector<const char*>& keys, const std::vector<const char*>& values) {
  conn_.reset(PQconnectStartParams(keys.data(), values.data(), /*expand_dbname=*/1));
  ConnectProgress progress;
  auto failed = [&] {
    Error e = connect_error(conn_.get(), dsn_.redacted, progress);
    conn_.reset();
    return std::unexpected(e);
  };
  if (!conn_ || PQstatus(conn_.get()) == CONNECTION_BAD) return failed();
  const Millis deadline = boottime_now() + options_.connect_timeout;
  const Millis per_host = std::max<Millis>(Millis(2000), options_.connect_timeout / host_count(conn_.get()));
  std::pair<std::string, std::string> rest;  // the host and port lists of a restart
  for (;;) {
    PGconn* c = conn_.get();
    PQsetErrorVerbosity(c, PQERRORS_VERBOSE);
    std::unique_ptr<PQconninfoOption, ConninfoDeleter> used(PQconninfo(c));
    for (auto* o = used.get(); o && o->keyword; ++o)
      if (std::string_view(o->keyword) == "sslmode" && o->val)
        progress.ssl_required = std::string_view(o->val) == "require" || std::string_view(o->val).starts_with("verify");
    PostgresPollingStatusType state = PGRES_POLLING_WRITING;
    Millis host_deadline = std::min(deadline, boottime_now() + per_host);
    bool timed_out = false;
    while (state != PGRES_POLLING_OK) {
      if (state == PGRES_POLLING_FAILED) return failed();
      short revents = 0;
      if (!wait_socket(PQsocket(c), state == PGRES_POLLING_READING ? POLLIN : POLLOUT, host_deadline, &revents)) {
        timed_out = true;
        break;
      }
      state = PQconnectPoll(c);
      const ConnStatusType st = PQstatus(c);
      if (st != CONNECTION_STARTED && st != CONNECTION_NEEDED && st != CONNECTION_BAD) progress.reached_server = true;
      // libpq moved on to another host by itself (refused, or not read-write): a fresh share.
      if (st == CONNECTION_STARTED) host_deadline = std::min(deadline, boottime_now() + per_host);
    }
    if (!timed_out) break;
    auto next = boottime_now() < deadline ? hosts_after_current(c) : std::nullopt;
    if (!next) {
      conn_.reset();
      Error e{ErrorKind::connection, "cannot connect to " + dsn_.redacted + ": no answer within the connect timeout"};
      // Connected, then no answer: a server too busy to accept us (core's storm retry).
      e.overloaded = progress.reached_server;
      return std::unexpected(std::move(e));
    }
    rest = std::move(*next);
    std::vector<const char*> k(keys.begin(), keys.end() - 1), v(values.begin(), values.end() - 1);
    k.insert(k.end(), {"host", "port", nullptr});
    v.insert(v.end(), {rest.first.c_str(), rest.second.c_str(), nullptr});
    conn_.reset(PQconnectStartParams(k.data(), v.data(), /*expand_dbname=*/1));
    if (!conn_ || PQstatus(conn_.get()) == CONNECTION_BAD) return failed();
  }
  PQsetErrorVerbosity(conn_.get(), PQERRORS_DEFAULT);
  return {};
}

bool Connection::is_open() const {
  return conn_ && PQstatus(conn_.get()) == CONNECTION_OK;
}

bool Connection::in_transaction() const {
  return is_open() && PQtransactionStatus(conn_.get()) == PQTRANS_INTRANS;
}

bool Connection::transaction_open() const {
  if (!is_open()) return false;
  auto st = PQtransactionStatus(conn_.get());
  return st == PQTRANS_INTRANS || st == PQTRANS_INERROR;
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

Error Connection::broken_and_closed(std::string_view doing) {
  Error e = broken(doing);  // libpq's message first: closing drops it
  close();
  return e;
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

// Writes what libpq buffered, reading meanwhile so a server answering early cannot deadlock us.
Result<void> Connection::flush(Millis deadline) {
  PGconn* c = conn_.get();
  short revents = 0;
  for (;;) {
    int f = PQflush(c);
    if (f == 0) return {};
    if (f < 0) return std::unexpected(broken("sending a statement"));
    if (!wait_socket(PQsocket(c), POLLOUT | POLLIN, deadline, &revents)) return std::unexpected(timed_out());
    if ((revents & POLLIN) && !PQconsumeInput(c)) return std::unexpected(broken("reading"));
  }
}

// The next result, waiting for it until the deadline; nullptr at the end of a statement's results.
Result<PGresult*> Connection::next_result(Millis deadline) {
  PGconn* c = conn_.get();
  short revents = 0;
  while (PQisBusy(c)) {
    if (!wait_socket(PQsocket(c), POLLIN, deadline, &revents)) return std::unexpected(timed_out());
    if (!PQconsumeInput(c)) return std::unexpected(broken("reading"));
  }
  return PQgetResult(c);
}

void Connection::drop_stale_notifications() {
  if (channel_.empty())  // left over from before an UNLISTEN: nobody will read them
    while (PGnotify* n = PQnotifies(conn_.get())) PQfreemem(n);
}

namespace {
// libpq's view of bound parameters: C strings, nullptr for NULL (they point into params).
std::vector<const char*> param_values(const Params& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  return values;
}
}  // namespace

Result<QueryResult> Connection::exec(std::string_view sql, const Params& params, Millis extra) {
  if (auto ok = connect_if_deferred(); !ok) return std::unexpected(ok.error());
  if (!is_open()) return std::unexpected(broken("not connected"));
  const Millis deadline = boottime_now() + options_.io_timeout + extra;
  PGconn* c = conn_.get();
  const std::string text(sql);
  int sent = 0;
  if (params.empty()) {
    sent = PQsendQuery(c, text.c_str());
  } else {
    const auto values = param_values(params);
    sent = PQsendQueryParams(c, text.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr, 0);
  }
  if (!sent) return std::unexpected(broken("sending a statement"));
  if (auto ok = flush(deadline); !ok) return std::unexpected(ok.error());
  QueryResult last, error;
  for (;;) {
    auto r = next_result(deadline);
    if (!r) return std::unexpected(r.error());
    if (!*r) break;
    auto status = PQresultStatus(*r);
    QueryResult owned(*r);
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
  drop_stale_notifications();
  return last;
}

void ListenSignal::holding(const std::string&) { (void)conn_->unlisten(); }

Result<bool> ListenSignal::busy(const std::string& key, Millis) {
  const std::string channel = release_channel(prefix_, key);
  if (!conn_->listening(channel)) {
    if (auto ok = conn_->listen(channel); !ok) return std::unexpected(ok.error());
    return true;
  }
  // A release announced while a statement ran sits in libpq's queue, where polling the socket
  // cannot see it.
  return conn_->drain_notifications();
}

Result<sql::Rows> Session::run(const sql::Statement& st, const sql::Params& params) {
  const sql::Compiled& compiled = compiled_.get(st);
  auto values = sql::bind_order(compiled, params, st.id);
  if (!values) return std::unexpected(values.error());
  Params text;
  text.reserve(values->size());
  for (const sql::Value* v : *values) {
    if (const auto* n = std::get_if<std::int64_t>(v)) text.emplace_back(std::to_string(*n));
    else if (const auto* s = std::get_if<std::string>(v)) text.emplace_back(*s);
    else text.emplace_back();
  }
  auto r = conn_->exec(compiled.text, text);
  if (!r) return std::unexpected(r.error());
  sql::Rows rows;
  const int columns = r->get() ? PQnfields(r->get()) : 0;
  for (int i = 0; i < r->rows(); ++i) {
    std::vector<sql::Rows::Cell> cells;
    cells.reserve(columns);
    for (int c = 0; c < columns; ++c) {
      if (r->is_null(i, c)) cells.emplace_back();
      else cells.emplace_back(r->text(i, c));
    }
    rows.add(std::move(cells));
  }
  // PQcmdTuples: rows changed, or for a SELECT (and RETURNING) the rows returned.
  rows.affected = r->affected();
  return rows;
}

Result<void> Session::exec(std::string_view sql) {
  if (auto r = conn_->exec(sql); !r) return std::unexpected(r.error());
  return {};
}

Result<void> Session::reconnect(const Error&) { return conn_->reconnect(); }

}  // namespace dblock::postgres
