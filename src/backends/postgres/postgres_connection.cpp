#include "backends/postgres/postgres_connection.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <thread>

#include "backends/common/trusted_file.hpp"
#include "backends/common/peer.hpp"
#include "backends/postgres/postgres_dsn.hpp"
#include "backends/postgres/postgres_tables.hpp"
#include "core/clock.hpp"
#include "core/sql/identifiers.hpp"
#include "core/sql/parameters.hpp"
#include "core/sql/pooler.hpp"

namespace dblock::postgres {
namespace {

// Waits until the socket is ready for `events` or the deadline passes; false on timeout. It
// looks at the socket even when the deadline has already passed: a process kept off the CPU
// until then (a host starting every cron job of the minute) must not call a server silent whose
// answer is waiting.
bool wait_socket(int fd, short events, Millis deadline, short* revents) {
  for (;;) {
    const Millis left = std::max(deadline - boottime_now(), Millis(0));
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 60'000)));
    if (n > 0 || (n < 0 && errno != EINTR)) {
      *revents = n > 0 ? p.revents : POLLERR;  // an error: let libpq report the broken socket
      return true;
    }
    if (left.count() == 0) return false;
  }
}

// The idle limits travel in the startup packet (libpq's `options`): no round trip. A
// bookkeeping connection sets them to 0, so the server's own idle killers cannot drop it while a
// long job runs; a lock holder gets the limit from its TTL, which its renewals never reach but
// which frees the lock of a holder whose network went dark, plus server-side keepalives and a
// TCP user timeout within it for a real partition (a userspace proxy's kernel would answer
// keepalives). `modern`: also the settings of PostgreSQL 14 and 12; an older server refuses
// them (42704) and gets the rest. The server takes at most INT_MAX ms and the kernel 32767 s: a
// longer limit is clamped, or, when the clamped limit would not cover a renew interval (a sixth
// of the limit), the idle limits are off and the keepalives alone find a dark peer.
std::string session_options(ConnectionRole role, Millis idle_limit, bool modern) {
  constexpr std::int64_t max_limit_ms = std::numeric_limits<std::int32_t>::max() / 1000 * 1000;
  constexpr std::int64_t max_keepalive_s = 32767;
  std::string limit_ms = "0", out;
  const bool holder = role == ConnectionRole::lock_holder && idle_limit.count() > 0;
  const std::int64_t limit_s = holder ? std::max<std::int64_t>((idle_limit.count() + 999) / 1000, 1) : 0;
  if (holder && limit_s * 1000 <= max_limit_ms)
    limit_ms = std::to_string(limit_s * 1000);
  else if (holder && max_limit_ms * 6 >= limit_s * 1000)
    limit_ms = std::to_string(max_limit_ms);
  auto set = [&out](std::string_view name, const std::string& value) {
    out += (out.empty() ? "-c " : " -c ") + std::string(name) + "=" + value;
  };
  if (modern) set("idle_session_timeout", limit_ms);
  set("idle_in_transaction_session_timeout", limit_ms);
  // A named statement runs on the plan made when it was named (name_for), not on one made in
  // its Bind, which on a handoff's path (a release, a waiter's take) is 0.4-0.7 ms of planning.
  // dblock's statements read a key's rows by their primary key: a plan for any values is the
  // plan for these values, and runs as fast.
  if (modern) set("plan_cache_mode", "force_generic_plan");
  if (holder) {
    // Three unanswered probes after a third of the limit, a ninth apart: dead by 2/3 of it.
    if (modern) set("tcp_user_timeout", std::to_string(std::min(limit_s * 1000, max_limit_ms)));
    set("tcp_keepalives_idle", std::to_string(std::clamp<std::int64_t>(limit_s / 3, 1, max_keepalive_s)));
    set("tcp_keepalives_interval", std::to_string(std::clamp<std::int64_t>(limit_s / 9, 1, max_keepalive_s)));
    set("tcp_keepalives_count", "3");
  }
  return out;
}

std::vector<std::string> split_commas(const char* list) {
  std::vector<std::string> out(1);
  for (const char* c = list ? list : ""; *c; ++c)
    if (*c == ',') out.emplace_back();
    else out.back() += *c;
  return out;
}

std::string join_commas(const std::vector<std::string>& items, std::size_t from) {
  std::string out;
  for (std::size_t i = from; i < items.size(); ++i) out += (i > from ? "," : "") + items[i];
  return out;
}

// The hosts after the one `c` is trying, as host and port lists (nullopt on the last): a
// multi-host DSN (a failover pair) whose current host never answers goes on to the next, which
// libpq itself does only in its blocking connect.
std::optional<std::pair<std::string, std::string>> hosts_after_current(PGconn* c) {
  const Conninfo used(PQconninfo(c));
  const auto hosts = split_commas(conninfo_value(used.get(), "host"));
  auto ports = split_commas(conninfo_value(used.get(), "port"));
  if (hosts.size() < 2) return std::nullopt;
  if (ports.size() == 1) ports.assign(hosts.size(), ports.front());
  if (ports.size() != hosts.size() || !PQhost(c) || !PQport(c)) return std::nullopt;
  for (std::size_t i = 0; i + 1 < hosts.size(); ++i)
    if (hosts[i] == PQhost(c) && ports[i] == PQport(c)) return std::pair{join_commas(hosts, i + 1), join_commas(ports, i + 1)};
  return std::nullopt;
}

void ignore_notice(void*, const char*) {}

// `values` as libpq takes them: every value as text, NULL as nullptr; `numbers` holds the
// integers' text meanwhile.
std::vector<const char*> text_args(const std::vector<const sql::Value*>& values, std::vector<std::string>& numbers) {
  numbers.assign(values.size(), std::string());
  std::vector<const char*> args;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (const auto* n = std::get_if<std::int64_t>(values[i])) numbers[i] = std::to_string(*n);
    const auto* s = std::get_if<std::string>(values[i]);
    args.push_back(s ? s->c_str() : std::holds_alternative<std::int64_t>(*values[i]) ? numbers[i].c_str() : nullptr);
  }
  return args;
}

// Pointers to each of `values`, as exec and text_args take them.
std::vector<const sql::Value*> pointers_to(const std::vector<sql::Value>& values) {
  std::vector<const sql::Value*> out;
  for (const sql::Value& v : values) out.push_back(&v);
  return out;
}

// Sends `sql` with `values` (one statement, unnamed), its parameters of `types`: false when
// libpq could not.
[[maybe_unused]] bool send_params(PGconn* c, const std::string& sql, const std::vector<sql::Value>& values,
                                  const Oid* types) {
  std::vector<std::string> numbers;
  const std::vector<const sql::Value*> pointers = pointers_to(values);
  const std::vector<const char*> args = text_args(pointers, numbers);
  return PQsendQueryParams(c, sql.c_str(), static_cast<int>(pointers.size()), types, args.data(), nullptr, nullptr, 0) != 0;
}

// The parameters libpq would use for this DSN once a service file (service=, PGSERVICE) and the
// environment (PGOPTIONS, PGAPPNAME, PGCONNECT_TIMEOUT, ...) have filled in what the DSN leaves
// out (dblock(1), DSN): a service's search_path in `options` must not be dropped for dblock's
// own settings. libpq has no call for that, so a connection that cannot start is asked what it
// was given: two socket directories and three ports, a count libpq refuses before it reads a
// password file or opens a socket (and were it to try, a directory that does not exist holds
// no socket). Without even the host it was given, libpq refused the service itself (unknown,
// or its file unreadable): ErrorKind::config with libpq's reason.
Result<Conninfo> resolved_conninfo(const Dsn& dsn) {
  const char* keys[] = {"dbname", "host", "port", nullptr};
  const char* values[] = {dsn.text.c_str(), "/nonexistent/dblock-probe,/nonexistent/dblock-probe", "1,2,3", nullptr};
  const std::unique_ptr<PGconn, decltype(&PQfinish)> probe(PQconnectStartParams(keys, values, /*expand_dbname=*/1),
                                                           &PQfinish);
  if (!probe) return fail(ErrorKind::internal, "cannot connect to " + dsn.redacted + ": out of memory");
  Conninfo used(PQconninfo(probe.get()));
  if (!conninfo_value(used.get(), "host"))
    return fail(ErrorKind::config,
                "cannot connect to " + dsn.redacted + ": " + redact_message(one_line(PQerrorMessage(probe.get())), dsn.text));
  return used;
}

// The service files libpq reads for a service (service= in the DSN, or PGSERVICE): the user's
// (PGSERVICEFILE, else ~/.pg_service.conf) and PGSYSCONFDIR's pg_service.conf. A service
// names the server and the user, so each that exists is trusted as a DSN file is (dblock(1),
// DSN); libpq's own system directory is root's.
Result<void> check_service_files(const PQconninfoOption* parsed) {
  const char* service = conninfo_value(parsed, "service");
  if (!service) service = std::getenv("PGSERVICE");
  if (!service || !*service) return {};
  std::vector<std::string> files;
  if (const char* file = std::getenv("PGSERVICEFILE"); file && *file)
    files.emplace_back(file);
  else if (const char* home = std::getenv("HOME"); home && *home)
    files.push_back(std::string(home) + "/.pg_service.conf");
  if (const char* dir = std::getenv("PGSYSCONFDIR"); dir && *dir) files.push_back(std::string(dir) + "/pg_service.conf");
  return trusted_existing("service file", files);
}

}  // namespace

Result<std::unique_ptr<Connection>> Connection::open(const Dsn& dsn, const BackendOptions& options, ConnectionRole role) {
  std::unique_ptr<Connection> conn(new Connection(dsn, options, role));
  if (auto ok = conn->reconnect(); !ok) return std::unexpected(ok.error());
  return conn;
}

std::unique_ptr<Connection> Connection::deferred(const Dsn& dsn, const BackendOptions& options) {
  std::unique_ptr<Connection> conn(new Connection(dsn, options, ConnectionRole::bookkeeping));
  conn->deferred_ = true;
  return conn;
}

Result<void> Connection::reconnect() {
  close();
  // libpq's own parser validates the URI (so sslmode, host=/socket dir, passfile... all work).
  auto parsed = parse_postgres_dsn(dsn_);
  if (!parsed) return std::unexpected(parsed.error());
  if (auto trusted = check_service_files(parsed->get()); !trusted) return trusted;
  // libpq rounds connect_timeout to whole seconds and treats 1 as 2.
  auto secs = std::max<std::int64_t>(2, (options_.connect_timeout.count() + 999) / 1000);
  const std::vector<std::pair<const char*, std::string>> defaults{
      {"application_name", "dblock"},
      {"connect_timeout", std::to_string(secs)},
      // A vanished server (cable, crash without RST) is noticed instead of hanging forever.
      {"keepalives", "1"},
      {"keepalives_idle", "10"},
      {"keepalives_interval", "2"},
      {"keepalives_count", "3"},
      {"tcp_user_timeout", std::to_string(std::max<std::int64_t>(1000, options_.io_timeout.count()))},
  };
  // What the DSN, its service and the environment set is kept; dblock fills in only the rest.
  auto resolved = resolved_conninfo(dsn_);
  if (!resolved) return std::unexpected(resolved.error());
  const PQconninfoOption* given = resolved->get();
  // The user's `options` come first: dblock's idle limits are not the user's to loosen.
  const char* user_options = conninfo_value(given, "options");
  for (bool modern : {true, false}) {
    std::string options = session_options(role_, options_.session_idle_limit, modern);
    if (user_options) options = std::string(user_options) + " " + options;
    std::vector<const char*> keys{"dbname", "options"}, values{dsn_.text.c_str(), options.c_str()};
    for (const auto& [k, v] : defaults)
      if (!conninfo_value(given, k)) {
        keys.push_back(k);
        values.push_back(v.c_str());
      }
    auto ok = start_connection(std::move(keys), std::move(values));
    if (!ok && modern && ok.error().sqlstate == "42704") continue;  // a server before 14: the older settings
    if (!ok) return ok;
    generic_plans_ = modern;
    break;
  }
  PQsetNoticeProcessor(conn_.get(), ignore_notice, nullptr);  // "already exists, skipping" is no news for cron mail
  ::fcntl(PQsocket(conn_.get()), F_SETFD, FD_CLOEXEC);        // the command under `run` must not inherit it
  PQsetnonblocking(conn_.get(), 1);
  if (!channel_.empty())
    if (auto r = exec("LISTEN " + quote_identifier(channel_, '"')); !r) return std::unexpected(r.error());
  return {};
}

// The nonblocking connect, so the server's refusal keeps its SQLSTATE (PQERRORS_VERBOSE
// while connecting, see connect_error) and the whole attempt ends by connect_timeout. With
// several hosts, each gets its share of it (at least 2 s) before the next is tried.
Result<void> Connection::start_connection(std::vector<const char*> keys, std::vector<const char*> values) {
  keys.push_back(nullptr);
  values.push_back(nullptr);
  bool reached_server = false, ssl_required = false;
  const Millis deadline = boottime_now() + options_.connect_timeout;
  std::optional<Millis> per_host;
  std::pair<std::string, std::string> rest;  // the host and port lists of a restart
  for (;;) {
    conn_.reset(PQconnectStartParams(keys.data(), values.data(), /*expand_dbname=*/1));
    PGconn* c = conn_.get();
    if (!c || PQstatus(c) == CONNECTION_BAD) break;
    const Conninfo used(PQconninfo(c));
    const std::size_t hosts = split_commas(conninfo_value(used.get(), "host")).size();
    if (!per_host) per_host = std::max<Millis>(Millis(2000), options_.connect_timeout / hosts);
    PQsetErrorVerbosity(c, PQERRORS_VERBOSE);
    const char* sslmode = conninfo_value(used.get(), "sslmode");
    ssl_required = sslmode && (std::string_view(sslmode) == "require" || std::string_view(sslmode).starts_with("verify"));
    PostgresPollingStatusType state = PGRES_POLLING_WRITING;
    Millis host_deadline = std::min(deadline, boottime_now() + *per_host);
    short revents = 0;
    while (state != PGRES_POLLING_OK && state != PGRES_POLLING_FAILED &&
           wait_socket(PQsocket(c), state == PGRES_POLLING_READING ? POLLIN : POLLOUT, host_deadline, &revents)) {
      state = PQconnectPoll(c);
      const ConnStatusType st = PQstatus(c);
      if (st != CONNECTION_STARTED && st != CONNECTION_NEEDED && st != CONNECTION_BAD) reached_server = true;
      // libpq moved on to another host by itself (refused, or not read-write): a fresh share.
      if (st == CONNECTION_STARTED) host_deadline = std::min(deadline, boottime_now() + *per_host);
    }
    if (state == PGRES_POLLING_OK) {
      PQsetErrorVerbosity(c, PQERRORS_DEFAULT);
      return {};
    }
    if (state == PGRES_POLLING_FAILED) break;
    auto next = boottime_now() < deadline ? hosts_after_current(c) : std::nullopt;
    if (!next) {
      conn_.reset();
      Error e{ErrorKind::connection, "cannot connect to " + dsn_.redacted + ": no answer within the connect timeout"};
      // Connected, then no answer: a server too busy to accept us (core's storm retry).
      e.overloaded = reached_server;
      return std::unexpected(std::move(e));
    }
    if (rest.first.empty()) {  // the first restart: host and port replace what the DSN says
      keys.insert(keys.end() - 1, {"host", "port"});
      values.insert(values.end() - 1, {nullptr, nullptr});
    }
    rest = std::move(*next);
    values[values.size() - 3] = rest.first.c_str();
    values[values.size() - 2] = rest.second.c_str();
  }
  Error e = connect_error(conn_.get(), dsn_.redacted, reached_server, ssl_required);
  conn_.reset();
  return std::unexpected(e);
}

std::optional<sql::Transport> Connection::transport() const {
  if (!is_open()) return std::nullopt;
  PGconn* c = conn_.get();
  const Peer peer = socket_peer(PQsocket(c));
  sql::Transport t;
  t.local = peer.local;
  t.peer = peer.address;
  t.how_to_verify = "sslmode=verify-full and sslrootcert=FILE";
  t.password = PQconnectionUsedPassword(c) != 0;
  if (PQsslInUse(c)) {
    t.encrypted = true;
    if (const char* p = PQsslAttribute(c, "protocol")) t.protocol = p;
    if (const char* p = PQsslAttribute(c, "cipher")) t.cipher = p;
    // libpq's rules: verify-ca and verify-full check the CA, verify-full the host name too; so
    // does require when a root certificate file is there (libpq(3), sslmode).
    const Conninfo used(PQconninfo(c));
    const std::string_view mode = conninfo_value(used.get(), "sslmode") ? conninfo_value(used.get(), "sslmode") : "";
    const char* root = conninfo_value(used.get(), "sslrootcert");
    t.host_verified = mode == "verify-full";
    t.ca_verified = mode.starts_with("verify") ||
                    (mode == "require" && root && std::string_view(root) != "system" && ::access(root, R_OK) == 0);
  }
  return t;
}

Result<void> Connection::listen(const std::string& channel) {
  if (channel == channel_) return {};
  if (auto r = exec("UNLISTEN *; LISTEN " + quote_identifier(channel, '"')); !r) return std::unexpected(r.error());
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
  for (PGnotify* n; (n = PQnotifies(conn_.get())); any = true) PQfreemem(n);
  return any;
}

Error Connection::broken(std::string_view doing) const {
  std::string text = conn_ ? one_line(PQerrorMessage(conn_.get())) : "connection closed";
  return Error{ErrorKind::connection, "postgres " + dsn_.redacted + ": " + std::string(doing) + ": " + text};
}

// Waits for the socket until the deadline and reads what arrived. On timeout the statement is
// cancelled and the connection closed: PQcancel opens a blocking connection with no timeout of
// its own, so a server that vanished would hang us; it runs on a detached thread.
Result<void> Connection::await(short events, Millis deadline) {
  short revents = 0;
  if (!wait_socket(PQsocket(conn_.get()), events, deadline, &revents)) {
    if (PGcancel* cancel = PQgetCancel(conn_.get())) {
      std::thread([cancel] {
        char buf[256];
        PQcancel(cancel, buf, sizeof buf);
        PQfreeCancel(cancel);
      }).detach();
    }
    close();
    return fail(ErrorKind::connection, "postgres " + dsn_.redacted + ": no answer within the I/O timeout; connection closed");
  }
  if ((revents & ~POLLOUT) && !PQconsumeInput(conn_.get())) return std::unexpected(broken("reading"));
  return {};
}

Result<sql::Rows> Connection::exec(std::string_view sql, const std::vector<const sql::Value*>& values, Millis extra,
                                   sql::Session* named_by) {
  if (auto ok = send(sql, values, extra, named_by); !ok) return std::unexpected(ok.error());
  return answer();
}

Result<void> Connection::send(std::string_view sql, const std::vector<const sql::Value*>& values, Millis extra,
                              sql::Session* named_by) {
  sent_.reset();
  if (!conn_ && deferred_)
    if (auto ok = reconnect(); !ok) return std::unexpected(ok.error());
  if (!is_open()) return std::unexpected(broken("not connected"));
  const Millis deadline = boottime_now() + options_.io_timeout + extra + std::exchange(ahead_extra_, Millis{0});
  PGconn* c = conn_.get();
  const std::string follower = std::exchange(follower_, {});
  const std::vector<sql::Value> follower_values = std::exchange(follower_values_, {});
  const std::string trailer = std::exchange(trailer_, {});
  const std::vector<sql::Value> trailer_values = std::exchange(trailer_values_, {});
  const std::string text(sql);
  std::vector<std::string> numbers;
  const std::vector<const char*> args = text_args(values, numbers);
  const int n = static_cast<int>(values.size());
  // Behind answers not read yet, a statement that has values, or that goes with statements sent
  // ahead of it, joins the pipeline: it is sent now, not once they are read. Several statements
  // in one text (a simple query) cannot: what is pending is read first.
  if (piping() && pipe_.queued == 0 && values.empty())
    if (auto ok = drain(deadline); !ok) return std::unexpected(ok.error());
#ifdef LIBPQ_HAS_PIPELINING
  if (!follower.empty()) {
    if (auto ok = enter_pipeline(); !ok) return std::unexpected(ok.error());
    pipe_.following = true;
    cork(true);
  }
  if (!trailer.empty()) {
    if (auto ok = enter_pipeline(); !ok) return std::unexpected(ok.error());
    pipe_.trailing = 1;
    cork(true);
  }
#endif
  std::string name;
  const bool in_group = std::exchange(name_in_group_, false);
  if (piping()) {
    // Only a name given already (naming one now would wait for its answer), and never in a
    // transaction begun ahead of it (name_for's reason) unless asked (name_next_in_group).
    if (auto it = names_.find(text);
        (pipe_.queued == 0 || in_group) && naming_ && named_by && n > 0 && named_for_ == c && it != names_.end() && it->second > 0)
      name = "dblock_" + std::to_string(it->second);
  } else {
    auto named = name_for(text, n, named_by, deadline, false);
    if (!named) return std::unexpected(named.error());
    name = *named;
  }
  const bool by_name = !name.empty();
  const bool piped = piping();
  const int sent = by_name          ? PQsendQueryPrepared(c, name.c_str(), n, args.data(), nullptr, nullptr, 0)
                   : piped || n > 0 ? PQsendQueryParams(c, text.c_str(), n, types_of(text), args.data(), nullptr, nullptr, 0)
                                    : PQsendQuery(c, text.c_str());
  if (!sent) return std::unexpected(broken("sending a statement"));
#ifdef LIBPQ_HAS_PIPELINING
  if (!follower.empty() && !send_params(c, follower, follower_values, types_of(follower)))
    return std::unexpected(broken("sending a statement"));
  if (piped && !PQpipelineSync(c)) return std::unexpected(broken("sending a statement"));
  if (pipe_.trailing > 0 && (!send_params(c, trailer, trailer_values, types_of(trailer)) || !PQpipelineSync(c)))
    return std::unexpected(broken("sending a statement"));
#endif
  cork(false);
  Sent out{deadline, by_name, piped, text, {}, extra, named_by, trailer, trailer_values, follower, follower_values};
  for (const sql::Value* v : values) out.values.push_back(*v);
  sent_ = std::move(out);
  return {};
}

Result<sql::Rows> Connection::answer() {
  if (!sent_) return fail(ErrorKind::internal, "postgres: no statement was sent to answer");
  const Sent s = std::move(*sent_);
  sent_.reset();
  if (!is_open()) return std::unexpected(broken("not connected"));
  PGconn* c = conn_.get();
  auto done = s.piped ? collect_piped(s.deadline, true) : collect(s.deadline);
  if (!done) return std::unexpected(done.error());
  if (s.by_name && done->sqlstate == "26000") {
    naming_ = false;
    std::vector<const sql::Value*> again;
    for (const sql::Value& v : s.values) again.push_back(&v);
    return exec(s.sql, again, s.extra, s.named_by);
  }
  if (done->error) return std::unexpected(statement_error(done->error.get(), c, dsn_.redacted));
#ifndef LIBPQ_HAS_PIPELINING
  if (!s.follower.empty())
    if (auto f = exec(s.follower, pointers_to(s.follower_values)); !f) return std::unexpected(f.error());
  if (!s.trailer.empty()) (void)exec(s.trailer, pointers_to(s.trailer_values));
#endif
  return rows_of(done->last.get());
}

Result<void> Connection::enter_pipeline() {
#ifdef LIBPQ_HAS_PIPELINING
  if (!piping() && !PQenterPipelineMode(conn_.get())) return std::unexpected(broken("entering pipeline mode"));
  return {};
#else
  return fail(ErrorKind::internal, "libpq has no pipeline mode");
#endif
}

Result<void> Connection::send_ahead(std::string_view sql, const std::vector<const sql::Value*>& values) {
#ifdef LIBPQ_HAS_PIPELINING
  if (!conn_ && deferred_)
    if (auto ok = reconnect(); !ok) return ok;
  if (!is_open()) return std::unexpected(broken("not connected"));
  if (auto ok = enter_pipeline(); !ok) return ok;
  const std::string text(sql);
  std::vector<std::string> numbers;
  const std::vector<const char*> args = text_args(values, numbers);
  if (!PQsendQueryParams(conn_.get(), text.c_str(), static_cast<int>(values.size()), types_of(text), args.data(), nullptr,
                         nullptr, 0))
    return std::unexpected(broken("sending a statement"));
  ++pipe_.queued;
  return {};
#else
  if (auto r = exec(sql, values); !r) return std::unexpected(r.error());
  return {};
#endif
}

Result<void> Connection::send_ahead_synced(std::string_view sql, const std::vector<const sql::Value*>& values,
                                           Millis extra) {
#ifdef LIBPQ_HAS_PIPELINING
  if (!is_open()) return std::unexpected(broken("not connected"));
  // Its answer is told apart only as the first group of the pipeline.
  if (piping())
    if (auto ok = drain(boottime_now() + options_.io_timeout); !ok) return ok;
  if (auto ok = enter_pipeline(); !ok) return ok;
  cork(true);  // until the statement after it is sent (exec)
  const std::string text(sql);
  std::vector<std::string> numbers;
  const std::vector<const char*> args = text_args(values, numbers);
  if (!PQsendQueryParams(conn_.get(), text.c_str(), static_cast<int>(values.size()), types_of(text), args.data(), nullptr,
                         nullptr, 0) ||
      !PQpipelineSync(conn_.get()))
    return std::unexpected(broken("sending a statement"));
  pipe_.background += 1;
  pipe_.keep_first = true;
  ahead_extra_ += extra;
  ahead_answer_.reset();
  return {};
#else
  auto r = exec(sql, values, extra);
  if (r) ahead_answer_ = "";
  else if (r.error().kind == ErrorKind::connection) return std::unexpected(r.error());
  else ahead_answer_ = r.error().sqlstate;
  return {};
#endif
}

Result<void> Connection::end_ahead(std::string_view sql) {
#ifdef LIBPQ_HAS_PIPELINING
  if (!is_open()) return std::unexpected(broken("not connected"));
  // A Sync now would end the group of statements queued for the next exec.
  if (pipe_.queued == 0) {
    if (auto ok = enter_pipeline(); !ok) return ok;
    cork(true);  // until the next statement is sent (send): one write
    const std::string text(sql);
    if (!PQsendQueryParams(conn_.get(), text.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0) ||
        !PQpipelineSync(conn_.get()))
      return std::unexpected(broken("sending a statement"));
    pipe_.ending = ++pipe_.background;
    return {};
  }
#endif
  if (auto r = exec(sql); !r) return std::unexpected(r.error());
  return {};
}

void Connection::send_unawaited(std::string_view sql, const std::vector<sql::Value>& values) {
  if (!is_open()) return;
  std::vector<const sql::Value*> pointers;
  for (const sql::Value& v : values) pointers.push_back(&v);
#ifdef LIBPQ_HAS_PIPELINING
  // Whatever went ahead of it goes with it, unread.
  const std::string text(sql);
  std::vector<std::string> numbers;
  const std::vector<const char*> args = text_args(pointers, numbers);
  if (!enter_pipeline() ||
      !PQsendQueryParams(conn_.get(), text.c_str(), static_cast<int>(pointers.size()), types_of(text), args.data(), nullptr,
                         nullptr, 0) ||
      !PQpipelineSync(conn_.get())) {
    close();  // a connection that cannot send ends what it held with it
    return;
  }
  pipe_.background += 1;
  pipe_.queued = 0;
  if (!flush(boottime_now() + options_.io_timeout)) close();
#else
  (void)exec(sql, pointers);
#endif
}

Result<void> Connection::flush(Millis deadline) {
  cork(false);
  for (int f; (f = PQflush(conn_.get())) != 0;) {
    if (f < 0) return std::unexpected(broken("sending a statement"));
    if (auto ok = await(POLLOUT | POLLIN, deadline); !ok) return ok;
  }
  return {};
}

// libpq flushes at each Sync (PQpipelineSync): statements of a round trip sent with a Sync each
// would leave in several segments, and a server that answers the first before the next reaches
// it turns one round trip into two on the wire. Corked, they leave together when uncorked. Not a
// TCP socket (a Unix one): nothing to do, and setsockopt says so.
void Connection::cork(bool on) {
  if (corked_ == on) return;
  corked_ = on;
  if (!is_open()) return;
  const int v = on ? 1 : 0;
  (void)::setsockopt(PQsocket(conn_.get()), IPPROTO_TCP, TCP_CORK, &v, sizeof v);
}

Result<Connection::Collected> Connection::collect_piped(Millis deadline, bool ours) {
#ifdef LIBPQ_HAS_PIPELINING
  PGconn* c = conn_.get();
  cork(false);
  if (auto ok = flush(deadline); !ok) return std::unexpected(ok.error());
  // One Sync ends each group: the background ones first, whose answers are dropped (the first
  // one's kept in ahead_answer_ where asked), then ours, then the trailing ones, dropped.
  const int ours_at = pipe_.background;
  const int groups = pipe_.background + (ours ? 1 : 0) + pipe_.trailing;
  // In ours, the statements sent ahead come first, then the exec's, then one that follows it.
  const int ours_index = pipe_.queued;
  Owned last(nullptr, &PQclear), error(nullptr, &PQclear), unended(nullptr, &PQclear);
  int synced = 0, ends = 0, index = 0;
  while (synced < groups) {
    while (PQisBusy(c))
      if (auto ok = await(POLLIN, deadline); !ok) return std::unexpected(ok.error());
    Owned r(PQgetResult(c), &PQclear);
    if (!r) {
      if (synced == ours_at && ends == 0) ++index;
      // The end of one statement's answers; two in a row: nothing more is coming.
      if (PQstatus(c) == CONNECTION_BAD || ++ends > 1) break;
      continue;
    }
    ends = 0;
    const auto status = PQresultStatus(r.get());
    if (status == PGRES_PIPELINE_SYNC) {
      ++synced;
      continue;
    }
    if (synced == 0 && pipe_.keep_first && status != PGRES_PIPELINE_ABORTED) {
      const char* st = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
      if (!ahead_answer_ || ahead_answer_->empty()) ahead_answer_ = status == PGRES_FATAL_ERROR && st ? st : "";
    }
    if (synced + 1 == pipe_.ending && status == PGRES_FATAL_ERROR && !unended) unended = std::move(r);
    if (!ours || synced != ours_at || status == PGRES_PIPELINE_ABORTED) continue;
    const bool failed = status == PGRES_FATAL_ERROR || status == PGRES_BAD_RESPONSE || status == PGRES_NONFATAL_ERROR;
    if (!failed && (!pipe_.following || index == ours_index)) last = std::move(r);
    else if (failed && !error) error = std::move(r);
    if (PQstatus(c) == CONNECTION_BAD) break;
  }
  pipe_ = {};
  if (synced < groups || !PQexitPipelineMode(c)) {
    // A server that ended the session said why (the statement's error); one that stopped
    // answering mid-way leaves a connection no one can use.
    if (PQstatus(c) != CONNECTION_BAD) close();
    if (!error || !conn_) return std::unexpected(broken("reading the answers of a pipeline"));
  }
  if (unended) {
    // The ROLLBACK sent ahead (end_ahead) failed: its transaction may be open still, and
    // whatever followed it did not run. Closed, the session ends it.
    const Error e = statement_error(unended.get(), c, dsn_.redacted);
    close();
    return fail(ErrorKind::connection, e.message + "; ending a refused transaction, the session closed");
  }
  if (channel_.empty())
    while (PGnotify* n = PQnotifies(c)) PQfreemem(n);
  const char* state = error ? PQresultErrorField(error.get(), PG_DIAG_SQLSTATE) : nullptr;
  return Collected{std::move(error), std::move(last), state ? state : ""};
#else
  (void)ours;
  return collect(deadline);
#endif
}

Result<void> Connection::drain(Millis deadline) {
  if (!piping()) return {};
  if (auto done = collect_piped(deadline, false); !done) return std::unexpected(done.error());
  return {};
}

// A statement this server session runs again (a waiter's next attempt, a renewal), or one made
// ready ahead (prepare), is parsed once: 100 lease waiters each try again at every release, and
// parsing the take is most of an attempt's server time. Its name is this connection's own number
// for it. Only outside a transaction: should the name be gone (26000, what transaction pooling
// does), naming turns off for this connection and the statement runs again unnamed, which is
// clean there. "" : run it unnamed.
Result<std::string> Connection::name_for(const std::string& text, int n, sql::Session* named_by, Millis deadline,
                                         bool now, bool ask) {
  PGconn* c = conn_.get();
  if (c != named_for_) names_.clear(), prepared_ = 0, named_for_ = c;
  // Behind groups of its own only (prepare's: each ends with its Sync), libpq says a statement
  // is in progress though the session is where those groups left it: two made ready at once (a
  // take and the numbering chained to a row lock's grant) are both parsed while waiting.
  const bool behind_groups = now && pipe_.background > 0 && pipe_.queued == 0 && pipe_.trailing == 0 && !pipe_.following;
  // Made ready ahead (now) inside a transaction: in a savepoint, below.
  const bool in_transaction =
      now && (PQtransactionStatus(c) == PQTRANS_INTRANS || (behind_groups && pipe_.in_transaction));
  // Behind a ROLLBACK sent ahead (end_ahead), with nothing queued after it, the session is idle.
  const bool idle = PQtransactionStatus(c) == PQTRANS_IDLE || (pipe_.ending > 0 && pipe_.queued == 0) ||
                    (behind_groups && !pipe_.in_transaction);
  if (!naming_ || !named_by || n == 0 || (!idle && !in_transaction)) return std::string();
  auto [it, first_run] = names_.try_emplace(text, 0);
  if (it->second == 0 && (now || !first_run)) {
    // Behind a pooler a name would only go missing and fill the server's log: ask first.
    if (prepared_ == 0) {
      if (!ask && direct_for_ != c) return std::string();
      auto direct = served_directly(*named_by);
      if (!direct) return std::unexpected(direct.error());
      naming_ = *direct;
    }
    if (naming_) {
      const std::string next = "dblock_" + std::to_string(prepared_ + 1);
#ifdef LIBPQ_HAS_PIPELINING
      // Made ready ahead: its answer is read by the next statement, which may be the one
      // named (exec); should the name not take, that statement runs again unnamed. It has a
      // Sync of its own: a Parse opens the implicit transaction that a Sync ends, and the
      // statement run by name later must not have now() from when it was parsed.
      // Planned in the same group where the session keeps one plan for every run
      // (session_options): EXPLAIN plans a statement without running it, so its run later skips
      // that too. Should the Parse fail, the EXPLAIN is skipped with it.
      // A statement run again (not `now`) is named the same way, its Parse in the pipeline ahead
      // of its run by that name: one round trip, where waiting for the Parse's answer first was
      // two (a waiter's second slice, a lease's second renewal, at a distance). Its run plans it.
      {
        if (auto ok = enter_pipeline(); !ok) return std::unexpected(ok.error());
        if (!now) cork(true);
        std::string plan = "EXPLAIN EXECUTE " + next + "(";
        for (int i = 0; i < n; ++i) plan += i ? ", NULL" : "NULL";
        plan += ")";
        // Inside a transaction (a row lock's, held), a failed Parse would end it and the lock
        // with it: in a savepoint, rolled back after it in a group of its own, which works
        // whether the Parse failed or not (a prepared statement outlives a rollback).
        auto send = [c](const char* sql) { return PQsendQueryParams(c, sql, 0, nullptr, nullptr, nullptr, nullptr, 0); };
        if ((in_transaction && !send("SAVEPOINT dblock_prepare")) ||
            !PQsendPrepare(c, next.c_str(), text.c_str(), n, types_of(text)) || (generic_plans_ && now && !send(plan.c_str())) ||
            !PQpipelineSync(c) ||
            (in_transaction && (!send("ROLLBACK TO SAVEPOINT dblock_prepare") ||
                                !send("RELEASE SAVEPOINT dblock_prepare") || !PQpipelineSync(c))))
          return std::unexpected(broken("sending a statement"));
        pipe_.background += in_transaction ? 2 : 1;
        if (in_transaction) pipe_.in_transaction = true;
        // Made ready ahead, it goes now; a statement's own naming goes with its run, corked
        // until send() has sent that too (libpq's Sync writes at once), in one segment: the Parse
        // on its own was at times answered before the run came, a turn more on the wire.
        // Behind a ROLLBACK sent ahead, it goes with that and the statement after it, in one write.
        if (now && pipe_.ending == 0) {
          if (auto ok = flush(deadline); !ok) return std::unexpected(ok.error());
        }
        it->second = ++prepared_;
        return "dblock_" + std::to_string(it->second);
      }
#endif
      if (!PQsendPrepare(c, next.c_str(), text.c_str(), n, types_of(text))) return std::unexpected(broken("sending a statement"));
      auto prepared = collect(deadline);
      if (!prepared) return std::unexpected(prepared.error());
      if (prepared->error) naming_ = false;
      else it->second = ++prepared_;
    }
  }
  return naming_ && it->second > 0 ? "dblock_" + std::to_string(it->second) : std::string();
}

Result<bool> Connection::served_directly(sql::Session& asking) {
  if (conn_.get() != direct_for_) {
    auto direct = sql::served_directly(asking, session_id_statement());
    if (!direct) return direct;
    direct_ = *direct;
    direct_for_ = conn_.get();
  }
  return direct_;
}

void Connection::declare(const sql::Compiled& compiled) {
  if (types_.contains(compiled.text) || std::ranges::none_of(compiled.names, sql::integer_parameter)) return;
  std::vector<Oid> types;
  for (const std::string& name : compiled.names) types.push_back(sql::integer_parameter(name) ? Oid{20} : Oid{0});
  types_.emplace(compiled.text, std::move(types));
}

const Oid* Connection::types_of(const std::string& sql) const {
  const auto it = types_.find(sql);
  return it == types_.end() ? nullptr : it->second.data();
}

void Connection::prepare(std::string_view sql, int n, sql::Session* named_by, bool ask) {
  if (!is_open()) return;
  (void)name_for(std::string(sql), n, named_by, boottime_now() + options_.io_timeout, true, ask);
}

Result<Connection::Collected> Connection::collect(Millis deadline) {
  PGconn* c = conn_.get();
  // Writes what libpq buffered, reading meanwhile so a server answering early cannot deadlock us.
  for (int f; (f = PQflush(c)) != 0;) {
    if (f < 0) return std::unexpected(broken("sending a statement"));
    if (auto ok = await(POLLOUT | POLLIN, deadline); !ok) return std::unexpected(ok.error());
  }
  Owned last(nullptr, &PQclear), error(nullptr, &PQclear);
  for (;;) {
    while (PQisBusy(c))
      if (auto ok = await(POLLIN, deadline); !ok) return std::unexpected(ok.error());
    Owned r(PQgetResult(c), &PQclear);
    if (!r) break;
    const auto status = PQresultStatus(r.get());
    const bool failed = status == PGRES_FATAL_ERROR || status == PGRES_BAD_RESPONSE || status == PGRES_NONFATAL_ERROR;
    if (!failed) last = std::move(r);
    else if (!error) error = std::move(r);
    if (PQstatus(c) == CONNECTION_BAD) break;
  }
  if (PQstatus(c) == CONNECTION_BAD && !error) return std::unexpected(broken("connection lost"));
  if (channel_.empty())  // left over from before an UNLISTEN: nobody will read them
    while (PGnotify* n = PQnotifies(c)) PQfreemem(n);
  const char* state = error ? PQresultErrorField(error.get(), PG_DIAG_SQLSTATE) : nullptr;
  return Collected{std::move(error), std::move(last), state ? state : ""};
}

sql::Rows Connection::rows_of(const PGresult* last) {
  sql::Rows out;
  for (int i = 0; last && i < PQntuples(last); ++i) {
    std::vector<sql::Rows::Cell> cells;
    for (int col = 0; col < PQnfields(last); ++col)
      cells.push_back(PQgetisnull(last, i, col) ? sql::Rows::Cell() : PQgetvalue(last, i, col));
    out.add(std::move(cells));
  }
  // PQcmdTuples: rows changed, or for a SELECT (and RETURNING) the rows returned.
  if (last) out.affected = std::strtol(PQcmdTuples(const_cast<PGresult*>(last)), nullptr, 10);
  return out;
}

// The wake primitive (core/sql/waiters.hpp) of a lease waiter: LISTEN/NOTIFY, heard by one
// waiter of a key at a time, the one that holds the key's queue lock (a session advisory lock
// on a hash of its own, never the advisory strategy's). The other waiters wait in the server for
// that lock, a slice at a time, and run no take meanwhile: a release (its statement NOTIFYs)
// wakes one waiter, whose take is the one statement it costs, not one per waiter. A reconnect
// loses the queue lock with the session (place()). Behind a pooler there is no queue lock (a
// session lock would stay with a server session that others are handed): every waiter
// listens, where NOTIFY passes at all.
//
// The handoff lock: a holder served directly also holds, for its run, a session advisory lock
// on a third hash of the key, taken by its take (the take's :hand, only on the row it took and
// only where pg_backend_pid() is the session's own: never behind a pooler) and let go in the
// release's round trip, right after the release's own transaction (send_after_next). The waiter
// at the head of the queue may send its take behind a wait in the server for that lock
// (queue.wait_ahead; when, core's Waiters decides; how, Session::run_behind): the release's
// commit lets the lock go and the take runs at once. A waiter let in without the row gives the
// lock back (let_in_without).
class ListenWake final : public sql::Wake {
 public:
  ListenWake(Session& session, std::shared_ptr<Connection> conn, std::string prefix)
      : session_(&session),
        conn_(std::move(conn)),
        prefix_(std::move(prefix)),
        q_(queue_statements()),
        give_back_(sql::compile(q_.leave.text, sql::PlaceholderStyle::dollar).text) {}
  // The release's NOTIFY needs nothing set up. Once the command runs, the holder stops
  // listening (best effort: what still arrives is dropped by every statement) and gives its
  // place back, so the key's next waiter takes it and listens while this command runs.
  void settle(const std::string& key) override {
    (void)conn_->unlisten();
    leave(key);
  }
  // The take's handoff lock, taken by its wait or by the take: given back with the release.
  void hold(const std::string&) override { hand_held_ = std::exchange(hand_tried_, {}); }
  // After the release: a handoff lock not let go in its round trip (a release in a
  // transaction of its own) goes now.
  void post(const std::string&) override {
    if (!hand_held_.empty()) conn_->send_unawaited(give_back_, {sql::Value(hand_lock(std::exchange(hand_held_, {})))});
  }
  Result<bool> join(const std::string& key, Millis left) override {
    auto direct = conn_->served_directly(*session_);
    if (!direct) return std::unexpected(direct.error());
    if (*direct) {
      const std::string timeout = std::to_string(left.count()) + "ms";
      auto queued = session_->run(q_.wait, {{"lock", queue_lock(key)}, {"lock_timeout", timeout}}, left);
      if (!queued) {
        if (queued.error().sqlstate == "55P03") return false;  // not at the head within `left`
        return std::unexpected(queued.error());
      }
      queued_on_ = conn_->backend_pid();
      queued_key_ = key;
    }
    if (auto ok = conn_->listen(release_channel(prefix_, key)); !ok) return std::unexpected(ok.error());
    return true;
  }
  // A release announced while a statement ran sits in libpq's queue, where polling the socket
  // cannot see it.
  Result<bool> wait(const std::string&, Millis) override { return conn_->drain_notifications(); }
  void leave(const std::string& key) override {
    if (queued_on_ != 0 && queued_on_ == conn_->backend_pid())
      (void)session_->run(q_.leave, {{"lock", queue_lock(key)}});
    queued_on_ = 0;
    queued_key_.clear();
  }
  int fd() const override { return conn_->socket(); }
  bool consume() override { return conn_->drain_notifications(); }
  std::int64_t place() const override { return conn_->backend_pid(); }
  bool at_head(const std::string& key) const override {
    return queued_on_ != 0 && queued_on_ == conn_->backend_pid() && queued_key_ == key;
  }
  const sql::Statement* wait_ahead(const std::string& key, Millis left, sql::Params& wait) override {
    wait.set("hand", hand_lock(key)).set("lock_timeout", std::to_string(left.count()) + "ms");
    return &q_.wait_ahead;
  }
  // A lease take's own parameters: :hand, the handoff lock its row takes, and :backend, the
  // server process the lock must be taken by; behind the wait for the holder's handoff lock,
  // none of its own (it has the lock or must not wait for it twice).
  void taking(const std::string& key, sql::Params& p, bool behind) override {
    sql::Value hand;
    hand_tried_.clear();
    if (!conn_->in_transaction() && !key.empty()) {
      hand_tried_ = key;
      if (!behind) hand = hand_lock(key);
    }
    p.set("hand", hand).set("backend", std::int64_t{conn_->backend_pid()});
  }
  // The take's last column counts its handoff lock's part (`h`): 1 where it took the row on the
  // session's own server process, which says the session is served directly, as
  // sql::served_directly would in a round trip of its own; the release is then named while the
  // command runs (LeaseLocker::prepare_release) at no cost.
  void took(const std::string&, const sql::Rows& took) override {
    if (!took.empty() && took[0].columns() > 0 && took[0].opt_int64(took[0].columns() - 1).value_or(0) == 1)
      conn_->seen_served_directly();
  }
  void let_in_without(const std::string& key) override {
    conn_->send_unawaited(give_back_, {sql::Value(hand_lock(key))});
  }
  // The lease's release: the handoff lock goes in its round trip, after its commit.
  void releasing(const std::string&) override {
    if (hand_held_.empty() || conn_->in_transaction()) return;
    const std::int64_t lock = hand_lock(std::exchange(hand_held_, {}));
    conn_->send_after_next(give_back_, {sql::Value(lock)});
  }

 private:
  std::int64_t queue_lock(const std::string& key) const { return key_hash(prefix_, "\x02queue " + key); }
  std::int64_t hand_lock(const std::string& key) const { return key_hash(prefix_, "\x03hand " + key); }

  Session* session_;
  std::shared_ptr<Connection> conn_;
  std::string prefix_;
  sql::QueueStatements q_;
  // queue.leave, its one parameter (:lock) $1: a handoff lock given back (sent unnamed, or
  // after another statement).
  std::string give_back_;
  int queued_on_ = 0;        // the server process on which this session holds a queue lock, or 0
  std::string queued_key_;   // the key of that queue lock
  std::string hand_tried_;   // the key whose handoff lock the last take took or waited for
  std::string hand_held_;    // the key whose handoff lock this holder holds (or may), or ""
};

Session::Session(std::shared_ptr<Connection> conn, std::string prefix)
    : conn_(conn) {
  waiters_ = sql::Waiters(std::make_unique<ListenWake>(*this, std::move(conn), std::move(prefix)));
}

// The lease's take and release carry the handoff lock: core tells ListenWake of them
// (Wake::taking, Wake::releasing), so every statement runs alike here.
Result<sql::Rows> Session::run(const sql::Statement& st, const sql::Params& params, Millis extra) {
  const sql::Compiled& compiled = compiled_.get(st);
  conn_->declare(compiled);
  auto values = sql::bind_order(compiled, params, st.id);
  if (!values) return std::unexpected(values.error());
  return conn_->exec(compiled.text, *values, extra, this);
}

Result<void> Session::send(const sql::Statement& st, const sql::Params& params, Millis extra) {
  const sql::Compiled& compiled = compiled_.get(st);
  conn_->declare(compiled);
  auto values = sql::bind_order(compiled, params, st.id);
  if (!values) return std::unexpected(values.error());
  return conn_->send(compiled.text, *values, extra, this);
}

Result<void> Session::send_ahead(const sql::Statement& st, const sql::Params& params) {
  const sql::Compiled& compiled = compiled_.get(st);
  conn_->declare(compiled);
  auto values = sql::bind_order(compiled, params, st.id);
  if (!values) return std::unexpected(values.error());
  return conn_->send_ahead(compiled.text, *values);
}

// The wait in a transaction of its own (Connection::send_ahead_synced), sent unnamed, and the
// statement in the same round trip; the wait's answer kept for after it.
Result<sql::Rows> Session::run_behind(const sql::Statement& ahead, const sql::Params& ahead_params,
                                      const sql::Statement& st, const sql::Params& params, Millis bound,
                                      sql::AheadAnswer& answer) {
  answer = sql::AheadAnswer::untold;
  const sql::Compiled& compiled = compiled_.get(ahead);
  conn_->declare(compiled);
  auto values = sql::bind_order(compiled, ahead_params, ahead.id);
  if (!values) return std::unexpected(values.error());
  if (auto ok = conn_->send_ahead_synced(compiled.text, *values, bound); !ok) return std::unexpected(ok.error());
  auto rows = run(st, params);
  if (auto said = conn_->ahead_answer())
    answer = said->empty() ? sql::AheadAnswer::let_in : sql::AheadAnswer::bound_reached;
  return rows;
}

void Session::prepare(const sql::Statement& st) {
  const sql::Compiled& compiled = compiled_.get(st);
  conn_->declare(compiled);
  conn_->prepare(compiled.text, static_cast<int>(compiled.names.size()), this);
}

void Session::prepare_unasked(const sql::Statement& st) {
  const sql::Compiled& compiled = compiled_.get(st);
  conn_->declare(compiled);
  conn_->prepare(compiled.text, static_cast<int>(compiled.names.size()), this, false);
}

Result<void> Session::exec(std::string_view sql) {
  if (auto r = conn_->exec(sql); !r) return std::unexpected(r.error());
  return {};
}

}  // namespace dblock::postgres
