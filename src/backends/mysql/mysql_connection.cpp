#include "backends/mysql/mysql_connection.hpp"

#include <fcntl.h>
#include <errmsg.h>
#include <mysqld_error.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <tuple>
#include <utility>
#include <variant>

#include "backends/common/trusted_file.hpp"
#include "backends/common/peer.hpp"
#include "backends/mysql/mysql_names.hpp"
#include "backends/mysql/mysql_tables.hpp"

namespace dblock::mysql {
namespace {

// The longest wait_timeout MySQL accepts (a year): the server's idle killers are off.
constexpr std::int64_t max_wait_timeout_s = 31536000;

// An idle limit of its own, as a server's wait_timeout (it may be 2 s) must not drop a session
// while a long job runs: a lock holder's ends the session (and frees the lock) of a holder whose
// network went dark; the others get a year. interactive_timeout too, in case an option file sets
// CLIENT_INTERACTIVE (the server then copies it into wait_timeout).
std::string idle_limits(ConnectionRole role, Millis idle_limit) {
  std::int64_t seconds = max_wait_timeout_s;
  if (role == ConnectionRole::lock_holder && idle_limit.count() > 0)
    seconds = std::clamp<std::int64_t>((idle_limit.count() + 999) / 1000, 1, max_wait_timeout_s);
  const std::string n = std::to_string(seconds);
  return "SESSION wait_timeout = " + n + ", SESSION interactive_timeout = " + n;
}

// Where the user and password come from, for a server that refused them (1045, or 1698 when
// an account's plugin wants what was not given): the DSN's sources in dblock, or, for what the
// DSN leaves out, the option files' group the connection read. The password is never shown.
std::string access_denied_hint(const MysqlDsn& t) {
  const std::string files = t.option_file ? *t.option_file : "~/.my.cnf (or another default option file)";
  const std::string where = "the [" + t.option_group + "] group of " + files;
  const std::string dsn_file = "a file that --dsn-file or DBLOCK_DSN_FILE names, or a systemd unit's credential "
                               "dblock-dsn (LoadCredential=dblock-dsn:FILE, read from $CREDENTIALS_DIRECTORY) (mode "
                               "0600; never on the command line, where ps shows it)";
  if (t.password)
    return "; the server refused this user with the DSN's password: fix the user or password in the DSN, kept in " +
           dsn_file + ", or leave the password out of the DSN and put password=... in " + where;
  return "; the DSN gives no password and " + where +
         " gave none the server accepts: put password=... there (mode 0600), or the password in the DSN, kept in " +
         dsn_file;
}

// The option files the client library reads (dblock(1), FILES): the DSN's option-file alone,
// else the default ones. Whoever may write one chooses the server and the user, and so who runs
// the job: each is trusted as a DSN file is. A named option-file that does not exist is a typo,
// not "no options".
Result<void> check_option_files(const MysqlDsn& t) {
  if (t.option_file) {
    struct stat st{};
    if (::stat(t.option_file->c_str(), &st) != 0)
      return fail(ErrorKind::config, "cannot read the DSN's option-file " + *t.option_file + ": " + std::strerror(errno));
    return trusted_file("option file " + *t.option_file, *t.option_file, st);
  }
  std::vector<std::string> files{"/etc/my.cnf", "/etc/mysql/my.cnf"};
  const char* mariadb_home = std::getenv("MARIADB_HOME");
  if (const char* dir = mariadb_home ? mariadb_home : std::getenv("MYSQL_HOME"); dir && *dir)
    files.push_back(std::string(dir) + "/my.cnf");
  if (const char* home = std::getenv("HOME"); home && *home) files.push_back(std::string(home) + "/.my.cnf");
  return trusted_existing("option file", files);
}

unsigned whole_seconds(Millis ms) {
  const auto count = std::max<std::int64_t>(ms.count(), 1);
  return static_cast<unsigned>(std::min<std::int64_t>((count + 999) / 1000, 86400));
}

// ssl-mode names follow MySQL's --ssl-mode (checked by parse_mysql_dsn). MariaDB Connector/C has
// no opportunistic mode: PREFERRED uses TLS when ssl-ca/ssl-cert/ssl-key are given, as the
// connector does by itself. True when an option is refused.
bool apply_ssl_mode(MYSQL* m, const std::string& mode) {
#ifdef MARIADB_BASE_VERSION
  my_bool on = 1;
  if (mode == "DISABLED" || mode == "PREFERRED") return false;
  const bool verify = mode == "VERIFY_CA" || mode == "VERIFY_IDENTITY";
  return mysql_options(m, MYSQL_OPT_SSL_ENFORCE, &on) != 0 ||
         (verify && mysql_options(m, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &on) != 0);
#else
  unsigned value = mode == "DISABLED"    ? SSL_MODE_DISABLED
                   : mode == "PREFERRED" ? SSL_MODE_PREFERRED
                   : mode == "REQUIRED"  ? SSL_MODE_REQUIRED
                   : mode == "VERIFY_CA" ? SSL_MODE_VERIFY_CA
                                         : SSL_MODE_VERIFY_IDENTITY;
  return mysql_options(m, MYSQL_OPT_SSL_MODE, &value) != 0;
#endif
}

// MYSQL_BIND points into the caller's values, which outlive mysql_stmt_execute (the client
// library only reads them); a string's length is its bind's own buffer_length.
std::vector<MYSQL_BIND> bind_params(const std::vector<const sql::Value*>& values) {
  std::vector<MYSQL_BIND> binds(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    MYSQL_BIND& b = binds[i];
    if (const auto* n = std::get_if<std::int64_t>(values[i])) {
      b.buffer_type = MYSQL_TYPE_LONGLONG;
      b.buffer = const_cast<std::int64_t*>(n);
    } else if (const auto* s = std::get_if<std::string>(values[i])) {
      b.buffer_type = MYSQL_TYPE_STRING;
      b.buffer = const_cast<char*>(s->data());
      b.buffer_length = static_cast<unsigned long>(s->size());
      b.length = &b.buffer_length;
    } else {
      b.buffer_type = MYSQL_TYPE_NULL;
    }
  }
  return binds;
}

}  // namespace

Result<std::unique_ptr<Connection>> Connection::open(const Dsn& dsn, const BackendOptions& options,
                                                    ConnectionRole role, std::string_view settings, bool idle_now) {
  auto target = parse_mysql_dsn(dsn);
  if (!target) return std::unexpected(target.error());
  // The settings go with the connection (reconnect): on MySQL as an init command would, a
  // round trip of its own; on MariaDB ahead of the session's first statement, in its round trip.
  // Only a lock holder's session sets them at once, and one that will sit idle while a job runs
  // (`idle_now`: a row-lock run's bookkeeping session). Another sets its idle limits once it will sit
  // idle (keep_idle), and a lease run's renewals keep its session busy. The statements need no
  // time zone (mysql_statements.cpp), but ShedLock's TIMESTAMP columns are read and written in
  // the session's. A connection made again gets them all.
  const std::string zone = options.shedlock ? "time_zone = '+00:00', " : "";
  const std::string idle = idle_limits(role, options.session_idle_limit);
  std::string every = "SET " + zone + idle + std::string(settings);
  std::string first = role == ConnectionRole::lock_holder || idle_now ? every
                      : zone.empty()                       ? std::string()
                                                           : "SET time_zone = '+00:00'";
  std::unique_ptr<Connection> conn(new Connection(dsn, std::move(*target), options, std::move(first)));
  conn->idle_command_ = "SET " + idle;
  conn->every_init_ = std::move(every);
  if (auto r = conn->reconnect(); !r) return std::unexpected(r.error());
  return conn;
}

Result<void> Connection::reconnect() {
  // mysql_library_init is not thread-safe; mysql_init would call it implicitly.
  static std::once_flag library_once;
  std::call_once(library_once, [] { mysql_library_init(0, nullptr, nullptr); });

  mysql_.reset();  // before its statements (statements_)
  statements_.clear();
  ended_by_last_ = false;
  std::unique_ptr<MYSQL, Close> m(mysql_init(nullptr));
  if (!m) return fail(ErrorKind::internal, "mysql_init failed (out of memory)");

  const MysqlDsn& t = target_;
  if (auto trusted = check_option_files(t); !trusted) return trusted;
  const unsigned connect_s = t.connect_timeout_s.value_or(whole_seconds(options_.connect_timeout));
  const unsigned io_s = whole_seconds(options_.io_timeout);
  max_block_ms_ = static_cast<std::int64_t>(io_s) * 1000 - 1000;
  my_bool no = 0;
  // A silent reconnect would lose a session lock without anyone noticing (dblock(1), STRATEGIES).
  const std::vector<std::tuple<mysql_option, const void*, const char*>> settings{
      {MYSQL_OPT_CONNECT_TIMEOUT, &connect_s, "connect timeout"},
      {MYSQL_OPT_READ_TIMEOUT, &io_s, "read timeout"},
      {MYSQL_OPT_WRITE_TIMEOUT, &io_s, "write timeout"},
      {MYSQL_OPT_RECONNECT, &no, "reconnect"},
      {MYSQL_SET_CHARSET_NAME, "utf8mb4", "charset"},
      {MYSQL_READ_DEFAULT_FILE, t.option_file ? t.option_file->c_str() : nullptr, "option-file"},
      {MYSQL_READ_DEFAULT_GROUP, t.option_group.c_str(), "option-group"},
      {MYSQL_OPT_SSL_CA, t.ssl_ca ? t.ssl_ca->c_str() : nullptr, "ssl-ca"},
      {MYSQL_OPT_SSL_CERT, t.ssl_cert ? t.ssl_cert->c_str() : nullptr, "ssl-cert"},
      {MYSQL_OPT_SSL_KEY, t.ssl_key ? t.ssl_key->c_str() : nullptr, "ssl-key"},
  };
  for (const auto& [option, value, what] : settings)
    if (value && mysql_options(m.get(), option, value) != 0)
      return fail(ErrorKind::config, "mysql " + dsn_.redacted + ": cannot set " + what);
  if (t.ssl_mode && apply_ssl_mode(m.get(), *t.ssl_mode))
    return fail(ErrorKind::config, "mysql " + dsn_.redacted + ": cannot set ssl-mode");

  const char* host = !t.host.empty() ? t.host.c_str() : (t.socket ? "localhost" : nullptr);
  // Empty user / no password: let the option file ([dblock] in ~/.my.cnf) supply them.
  const char* user = t.user.empty() ? nullptr : t.user.c_str();
  const char* password = t.password ? t.password->c_str() : nullptr;
  const char* database = t.database.empty() ? nullptr : t.database.c_str();
  const auto connecting = std::chrono::steady_clock::now();
  const bool connected = mysql_real_connect(m.get(), host, user, password, database, t.port.value_or(0),
                                            t.socket ? t.socket->c_str() : nullptr, 0) != nullptr;
  handshake_ = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - connecting);
  if (!connected) {
    Error e = make_error(mysql_errno(m.get()), dsn_.redacted, mysql_error(m.get()), mysql_sqlstate(m.get()));
    if (e.kind == ErrorKind::other) e.kind = ErrorKind::connection;
    // Worded as PostgreSQL's: "cannot connect to DSN: the client library's reason".
    e.message = "cannot connect to " + dsn_.redacted + ": " + mysql_error(m.get()) + " (errno " +
                std::to_string(mysql_errno(m.get())) + ")";
    if (e.native_code == ER_ACCESS_DENIED_ERROR || e.native_code == ER_ACCESS_DENIED_NO_PASSWORD_ERROR)
      e.message += access_denied_hint(t);
    // TLS refused (a certificate that does not verify, a server without TLS): trying again
    // cannot help, as libpq's counterpart (postgres_error.cpp) says too.
    if (e.native_code == CR_SSL_CONNECTION_ERROR) e.kind = ErrorKind::config;
    return std::unexpected(std::move(e));
  }
  // Connector/C lets ssl-mode=REQUIRED without a CA or certificate fall back to plain TCP when
  // the server offers no TLS: what the DSN demands is checked here.
  if (t.ssl_mode && *t.ssl_mode != "DISABLED" && *t.ssl_mode != "PREFERRED" && !mysql_get_ssl_cipher(m.get()))
    return fail(ErrorKind::config, "cannot connect to " + dsn_.redacted + ": the server does not offer TLS, which ssl-mode=" +
                                       *t.ssl_mode + " demands; turn TLS on at the server, or change ssl-mode");
  // The command run under `run` must not inherit the database socket (dblock(1), run).
  if (const int fd = static_cast<int>(mysql_get_socket(m.get())); fd >= 0) fcntl(fd, F_SETFD, FD_CLOEXEC);
  // The database the session is in, as the handshake left it (the DSN's, an option file's, or
  // the server's spelling when it reports the session's schema): the key's lock names hash it.
  database_ = m->db ? m->db : "";
  mysql_ = std::move(m);
  // The settings: on MariaDB they go with the session's first statement, in its round trip
  // (run); MySQL has no block to carry them, so they go now, a round trip as an init command's.
  // Their text is the same on both (the isolation level's name in comments each server reads).
  deferred_.clear();
  if (!init_command_.empty()) {
    if (mariadb()) {
      deferred_ = init_command_;
    } else if (auto ok = query(init_command_); !ok) {
      mysql_.reset();
      return ok;
    }
  }
  // From here on every connection made again sets them all.
  if (init_command_ == every_init_) idle_set_ = true;
  init_command_ = every_init_;
  return {};
}

Result<void> Connection::keep_idle() {
  if (idle_set_) return {};
  if (auto ok = query(idle_command_); !ok) return ok;
  idle_set_ = true;
  return {};
}

std::optional<sql::Transport> Connection::transport() const {
  if (!mysql_) return std::nullopt;
  MYSQL* m = mysql_.get();
  const Peer peer = socket_peer(socket());
  sql::Transport t;
  t.local = peer.local;
  t.peer = peer.address;
  t.how_to_verify = "ssl-mode=VERIFY_IDENTITY and ssl-ca=FILE";
  if (const char* cipher = mysql_get_ssl_cipher(m)) {
    t.encrypted = true;
    t.cipher = cipher;
#ifdef MARIADB_BASE_VERSION
    const char* version = nullptr;
    if (mariadb_get_infov(m, MARIADB_CONNECTION_TLS_VERSION, &version) == 0 && version) t.protocol = version;
    // Connector/C checks the CA and the host name together (apply_ssl_mode), or neither.
    my_bool verify = 0;
    if (mysql_get_optionv(m, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &verify) == 0 && verify)
      t.ca_verified = t.host_verified = true;
#else
    const std::string mode = target_.ssl_mode.value_or("");
    t.ca_verified = mode == "VERIFY_CA" || mode == "VERIFY_IDENTITY";
    t.host_verified = mode == "VERIFY_IDENTITY";
#endif
  }
  // The one the login used: the DSN's, or an option file's.
  t.password = m->passwd && *m->passwd;
  return t;
}

Error Connection::error_from_mysql() const {
  if (!mysql_) return Error{ErrorKind::connection, "mysql " + dsn_.redacted + ": not connected"};
  return make_error(mysql_errno(mysql_.get()), dsn_.redacted, mysql_error(mysql_.get()), mysql_sqlstate(mysql_.get()));
}

Error Connection::error_from_stmt(MYSQL_STMT* stmt) const {
  return make_error(mysql_stmt_errno(stmt), dsn_.redacted, mysql_stmt_error(stmt), mysql_stmt_sqlstate(stmt));
}

std::unexpected<Error> Connection::failed(Error e) {
  gave_back_wake_.clear();  // a statement that failed gave nothing back
  if (e.kind == ErrorKind::connection) statements_.clear();
  return std::unexpected(std::move(e));
}

Result<MYSQL_STMT*> Connection::prepared(const std::string& text, std::vector<MYSQL_BIND>& binds, bool& executed) {
  executed = false;
  if (auto it = statements_.find(text); it != statements_.end()) return it->second.get();
  std::unique_ptr<MYSQL_STMT, Close> stmt(mysql_stmt_init(mysql_.get()));
  if (!stmt) return std::unexpected(error_from_mysql());
#ifdef MARIADB_BASE_VERSION
  // Prepare and execute in one round trip (MariaDB 10.2+); later executions reuse the statement.
  unsigned int count = static_cast<unsigned int>(binds.size());
  if (mysql_stmt_attr_set(stmt.get(), STMT_ATTR_PREBIND_PARAMS, &count) != 0 ||
      (count > 0 && mysql_stmt_bind_param(stmt.get(), binds.data()) != 0) ||
      mariadb_stmt_execute_direct(stmt.get(), text.data(), text.size()) != 0)
    return std::unexpected(error_from_stmt(stmt.get()));
  executed = true;
#else
  if (mysql_stmt_prepare(stmt.get(), text.data(), static_cast<unsigned long>(text.size())) != 0)
    return std::unexpected(error_from_stmt(stmt.get()));
  // The server's own count: binding fewer values than it expects would read past `binds`.
  if (mysql_stmt_param_count(stmt.get()) != binds.size())
    return fail(ErrorKind::internal, "mysql statement has " + std::to_string(mysql_stmt_param_count(stmt.get())) +
                                         " parameters but " + std::to_string(binds.size()) + " values: " + text);
#endif
  return statements_.emplace(text, std::move(stmt)).first->second.get();
}

Result<void> Connection::settle() {
  if (!mysql_ && std::exchange(ended_by_last_, false))
    if (auto ok = reconnect(); !ok) return ok;
  if (!mysql_) return std::unexpected(error_from_mysql());
  return {};
}

const sql::Params& Connection::with_names(const sql::Compiled& compiled, const sql::Params& params) {
  auto names_one = [&](std::string_view name) {
    return std::find(compiled.names.begin(), compiled.names.end(), name) != compiled.names.end();
  };
  const auto* key = params.find("key");
  gave_back_wake_.clear();
  if (!(names_one("wake") || names_one("queue") || names_one("wake_given_back")) || !key ||
      !std::holds_alternative<std::string>(*key) || params.find("wake"))
    return params;
  const std::string& k = std::get<std::string>(*key);
  if (names_one("wake_given_back")) gave_back_wake_ = k;
  if (named_key_ != k || named_database_ != database_) {
    named_key_ = k;
    named_database_ = database_;
    wake_ = wake_name(database_, options_.table_prefix, k);
    queue_ = queue_name(database_, options_.table_prefix, k);
  }
  named_ = params;
  return named_.set("wake", wake_).set("queue", queue_).set("wake_given_back", wake_);
}

Result<sql::Rows> Connection::run(const sql::Statement& st, const sql::Params& given) { return execute(st, given, nullptr); }

namespace {

// `st` as a statement of a block: a block itself (BEGIN NOT ATOMIC ... END, MariaDB's top-level
// form) nested as a plain BEGIN ... END, which keeps its declarations and its error handler.
std::string in_block(const std::string& st) {
  constexpr std::string_view top = "BEGIN NOT ATOMIC ";
  return st.starts_with(top) ? "BEGIN " + st.substr(top.size()) : st;
}

}  // namespace

// Two statements in one round trip: a block (compiled once per text, as any statement) whose
// first answer is `ahead`'s, then `st`'s (either a block itself nested in it: the numbering
// behind its gate's wait, or behind a first attempt's wait for its proof, lock.grant_wait).
// What put_ahead_of_next left (a holder's lock wait, txn-insert's INSERT) goes after the wait,
// answerless, so the wait's answer stays the block's first.
Result<sql::Rows> Connection::run_behind(const sql::Statement& ahead, const sql::Statement& st,
                                         const sql::Params& params, sql::Rows& ahead_rows) {
  const std::string then = std::exchange(ahead_, {}).text, after = std::exchange(after_, {}).text;
  // The session's deferred settings (its idle limits) at the block's head, answerless: a first
  // attempt's numbering is the bookkeeping session's first statement, and in a query of their
  // own ahead of it they would cost it a round trip. Failed, they go with the next statement.
  const std::string settings = std::exchange(deferred_, {});
  auto r = execute({st.id, "BEGIN NOT ATOMIC " + (settings.empty() ? "" : settings + "; ") + in_block(ahead.text) + "; " +
                               (then.empty() ? "" : then + "; ") + in_block(st.text) + "; " + (after.empty() ? "" : after + "; ") +
                               "END"},
                   params, &ahead_rows);
  if (!r && deferred_.empty()) deferred_ = settings;
  return r;
}

Result<sql::Rows> Connection::execute(const sql::Statement& given_st, const sql::Params& given, sql::Rows* first) {
  // What goes ahead of the statement (put_ahead_of_next's, and the session's deferred settings
  // after a reconnect: neither has an answer of its own) and after it (put_after_next's) goes in
  // one block with it; the settings in a query of their own ahead of a statement that is a
  // block itself.
  sql::Statement with_ahead;
  if (!deferred_.empty() && given_st.text.starts_with("BEGIN NOT ATOMIC"))
    if (auto ok = query(std::exchange(deferred_, {})); !ok) return failed(ok.error());
  std::string ahead = std::exchange(ahead_, {}).text;
  const std::string after = std::exchange(after_, {}).text;
  if (!deferred_.empty()) ahead = deferred_ + (ahead.empty() ? "" : "; " + ahead);
  if (!ahead.empty() || !after.empty())
    with_ahead = {given_st.id, "BEGIN NOT ATOMIC " + (ahead.empty() ? "" : ahead + "; ") + in_block(given_st.text) + "; " +
                                   (after.empty() ? "" : after + "; ") + "END"};
  const sql::Statement& st = with_ahead.empty() ? given_st : with_ahead;
  if (auto ok = settle(); !ok) return failed(ok.error());
  const sql::Compiled& compiled = compiled_.get(st);
  const sql::Params& params = with_names(compiled, given);
  auto values = sql::bind_order(compiled, params, st.id);
  if (!values) return failed(values.error());
  if (!mysql_) return std::unexpected(error_from_mysql());
  std::vector<MYSQL_BIND> binds = bind_params(*values);
  bool executed = false;
  auto stmt_or = prepared(compiled.text, binds, executed);
  if (!stmt_or) return failed(stmt_or.error());
  MYSQL_STMT* stmt = *stmt_or;
  auto stmt_failed = [&] {
    Error e = error_from_stmt(stmt);
    if (e.kind != ErrorKind::connection) mysql_stmt_free_result(stmt);
    return failed(std::move(e));
  };
  if (!executed && ((!binds.empty() && mysql_stmt_bind_param(stmt, binds.data()) != 0) ||
                    mysql_stmt_execute(stmt) != 0))
    return stmt_failed();
  // Ran: the settings it carried are the session's (failed, it carries them again next time).
  if (!with_ahead.empty()) deferred_.clear();
  sql::Rows out;
  out.affected = static_cast<std::int64_t>(mysql_stmt_affected_rows(stmt));
  std::unique_ptr<MYSQL_RES, Close> meta(mysql_stmt_result_metadata(stmt));
  if (!meta) return out;
  if (first) {
    // The block's first answer is the statement ahead's; the one after it is the statement's,
    // none where the statement is a block that answered nothing (a numbering that found no
    // grant to number): then only the block's own answer follows.
    if (!fetch_rows(stmt, meta.get(), *first)) return stmt_failed();
    if (!mysql_stmt_more_results(stmt) || mysql_stmt_next_result(stmt) != 0) return stmt_failed();
    meta.reset(mysql_stmt_result_metadata(stmt));
    if (!meta) out.affected = 0;
  }
  if (meta && !fetch_rows(stmt, meta.get(), out)) return stmt_failed();
  // A block of statements (lease.release_recorded on MariaDB) ends with the block's own answer
  // after its rows, and put_after_next's answer (the numbering gate's give-back) comes before
  // that: read and dropped, so the connection is ready for the next statement.
  while (mysql_stmt_more_results(stmt)) {
    if (mysql_stmt_next_result(stmt) > 0) return stmt_failed();
    if (mysql_stmt_field_count(stmt) > 0 && (mysql_stmt_store_result(stmt) != 0 || mysql_stmt_free_result(stmt) != 0))
      return stmt_failed();
  }
  if (meta) out.affected = static_cast<std::int64_t>(out.size());
  return out;
}

bool Connection::fetch_rows(MYSQL_STMT* stmt, MYSQL_RES* meta, sql::Rows& out) {
  // Values that do not fit the buffers are fetched again whole (mysql_stmt_fetch_column).
  const unsigned ncols = mysql_num_fields(meta);
  std::vector<MYSQL_BIND> cols(ncols);
  std::vector<std::vector<char>> buffers(ncols, std::vector<char>(512));
  std::vector<unsigned long> lengths(ncols);
  std::vector<my_bool> nulls(ncols);
  for (unsigned i = 0; i < ncols; ++i) {
    cols[i].buffer_type = MYSQL_TYPE_STRING;
    cols[i].buffer = buffers[i].data();
    cols[i].buffer_length = static_cast<unsigned long>(buffers[i].size());
    cols[i].length = &lengths[i];
    cols[i].is_null = &nulls[i];
  }
  if (mysql_stmt_bind_result(stmt, cols.data()) != 0 || mysql_stmt_store_result(stmt) != 0) return false;
  for (int rc; (rc = mysql_stmt_fetch(stmt)) != MYSQL_NO_DATA;) {
    if (rc != 0 && rc != MYSQL_DATA_TRUNCATED) return false;
    std::vector<sql::Rows::Cell> row(ncols);
    for (unsigned i = 0; i < ncols; ++i) {
      if (nulls[i]) continue;
      std::string value(buffers[i].data(), std::min<std::size_t>(lengths[i], buffers[i].size()));
      if (lengths[i] > buffers[i].size()) {
        value.resize(lengths[i]);
        MYSQL_BIND whole{};
        whole.buffer_type = MYSQL_TYPE_STRING;
        whole.buffer = value.data();
        whole.buffer_length = lengths[i];
        if (mysql_stmt_fetch_column(stmt, &whole, i, 0) != 0) return false;
      }
      row[i] = std::move(value);
    }
    out.add(std::move(row));
  }
  mysql_stmt_free_result(stmt);
  return true;
}

Result<void> Connection::query(std::string_view sql) {
  if (auto ok = settle(); !ok) return ok;
  // The deferred settings first (reconnect): a statement without parameters carries none.
  if (!deferred_.empty()) {
    const std::string settings = std::exchange(deferred_, {});
    if (auto ok = query(settings); !ok) {
      deferred_ = settings;
      return ok;
    }
  }
  if (mysql_real_query(mysql_.get(), sql.data(), static_cast<unsigned long>(sql.size())) != 0)
    return failed(error_from_mysql());
  do {
    std::unique_ptr<MYSQL_RES, Close> res(mysql_store_result(mysql_.get()));
    if (!res && mysql_field_count(mysql_.get()) != 0) return std::unexpected(error_from_mysql());
  } while (mysql_next_result(mysql_.get()) == 0);
  return {};
}

// A finished run's last COMMIT (sql::Session::exec_last), sent with the goodbye (COM_QUIT) and
// not waited for: the server commits it before it ends the session, as it reads in order, and
// the run exits a round trip sooner (dblock(1), NOTES, Round trips). The session's end gives
// back the names it holds, the key's wake name too, after the commit. Nothing of the run
// follows; a later statement (a test's) gets a new session.
Result<void> Connection::query_last(std::string_view sql) {
  if (auto ok = settle(); !ok) return ok;
  if (mysql_send_query(mysql_.get(), sql.data(), static_cast<unsigned long>(sql.size())) != 0)
    return failed(error_from_mysql());
  close();
  ended_by_last_ = true;
  return {};
}

// The wake primitive (core/sql/waiters.hpp) in named locks (wake_statements): a holder keeps
// the key's wake name, the waiter with the key's queue name blocks on it, the others wait for
// the queue name. A failure to take or give back a name only sends waiters back to core's
// backoff: not the lock's failure.
//
// On MariaDB the waiter at the head of the queue (it holds the queue name) may wait for the wake
// name ahead of its lease take, in one round trip (wake.wait_ahead; when, core's Waiters
// decides; how, Session::run_behind).
class NamedLockWake final : public sql::Wake {
 public:
  NamedLockWake(Connection& conn, const std::string& prefix) : conn_(&conn), s_(wake_statements(prefix, conn.mariadb())) {}
  /// The holder's session holds `key`'s wake name (Session::wake_held_by_holder).
  void held_by_holder(const std::string& key) { by_holder_ = key; }
  // A MariaDB lease take answers, in its last two columns, the wake name taken (NULL: not taken)
  // and the queue name given back (lease_statements).
  void took(const std::string& key, const sql::Rows& r) override {
    if (!r.empty() && r[0].columns() >= 2 && !r[0].is_null(r[0].columns() - 2)) held_by_take_ = key;
    // The first column is the token taken (NULL: refused); taken, the take gave the queue name
    // back.
    if (!r.empty() && !r[0].is_null(0)) head_.clear();
  }
  // Where the statements offer a wait ahead (a block: MariaDB's, Connection::run_behind).
  bool at_head(const std::string& key) const override { return head_ == key && !s_.wait_ahead.empty(); }
  // Within the slice, and never past what a statement may block (max_block_ms). The queue
  // name is this session's, wherever the take runs (a row lock's: in its holder session).
  const sql::Statement* wait_ahead(const std::string& key, Millis left, sql::Params& wait) override {
    wait.set("key", key).set("wait_ms", std::min<std::int64_t>(left.count(), conn_->max_block_ms()));
    wait.set("head", static_cast<std::int64_t>(conn_->session_id()));
    return &s_.wait_ahead;
  }
  // A row-lock strategy's row is read back by taken_holding, which takes the key's wake name too,
  // unless the holder's session took it with the lock: the hold() that follows sends nothing.
  bool reading_taken(const std::string& key, const sql::Params& read, Result<sql::Rows>& r) override {
    sql::Params p = read;
    const bool take_wake = by_holder_ != key;
    r = conn_->run(s_.taken_holding, p.set("take_wake", std::int64_t{take_wake ? 1 : 0}));
    // The queue name is given back either way; the wake name, when taken here, is this session's
    // (GET_LOCK's 0: another holds it, hold() asks again).
    if (r && !r->empty() && take_wake && (*r)[0].opt_int64(3).value_or(0) == 1) held_by_take_ = key;
    return true;
  }
  // A session that a finished run's last COMMIT ended (Connection::query_last) gave it back, and
  // the holder's session gives back the one it holds as it ends.
  // The release's own statement may have given it back already (Connection::gave_back_wake).
  // A session that never held it (`dblock release` of another process's holder) has nothing to
  // give back: the holder's session gives its own back (a round trip less).
  void post(const std::string& key) override {
    const bool held = std::exchange(held_, std::string()) == key;
    if (conn_->gave_back_wake() == key) return;
    if (std::exchange(by_holder_, std::string()) == key) return;
    if (held && !conn_->ended_by_last()) (void)conn_->run(s_.wake_release, {{"key", key}});
  }
  void hold(const std::string& key) override {
    head_.clear();
    const bool taken = std::exchange(held_by_take_, std::string()) == key;
    if (by_holder_ == key) return;
    held_ = key;
    if (taken) return;
    (void)conn_->run(s_.wake_hold, {{"key", key}});
  }
  // One statement both takes the queue name and, holding it, waits on the wake name.
  Result<bool> join(const std::string& key, Millis left) override { return wait(key, left); }
  // wake.wait answers 1 holding the queue name (queued, or woken at its head) and 0 not (it gives
  // the name back when its wait at the head ends unwoken).
  Result<bool> wait(const std::string& key, Millis left) override {
    if (left <= Millis(0)) return false;
    auto woken = conn_->run(s_.wake_wait, {{"key", key}, {"wait_ms", std::min(left.count(), conn_->max_block_ms())}});
    if (!woken) return std::unexpected(woken.error());
    const bool queued = (*woken)[0].text(0) == "1";
    head_ = queued ? key : std::string();
    return queued;
  }
  // The queue name given back; a waiter holds no wake name of the key it waits for (core leaves
  // no key it holds), so wake_release's other half changes nothing.
  void leave(const std::string& key) override {
    head_.clear();
    (void)conn_->run(s_.wake_release, {{"key", key}});
  }

 private:
  Connection* conn_;
  WakeStatements s_;
  std::string held_by_take_;
  std::string held_;       // the key whose wake name hold() took (or the take took), or ""
  std::string by_holder_;  // the key whose wake name the holder's session holds, or ""
  std::string head_;       // the key whose queue name this session holds (wake.wait said so), or ""
};

namespace {
std::unique_ptr<NamedLockWake> wake_of(Connection& conn, const std::string& prefix, NamedLockWake*& out) {
  auto w = std::make_unique<NamedLockWake>(conn, prefix);
  out = w.get();
  return w;
}
}  // namespace

Session::Session(std::unique_ptr<Connection> conn, std::string prefix)
    : conn_(std::move(conn)), waiters_(wake_of(*conn_, prefix, wake_)) {}

void Session::wake_held_by_holder(const std::string& key) { wake_->held_by_holder(key); }

Result<sql::Rows> Session::run_behind(const sql::Statement& ahead, const sql::Params& ahead_params,
                                      const sql::Statement& st, const sql::Params& params, Millis bound,
                                      sql::AheadAnswer& answer) {
  if (!conn_->mariadb()) return sql::Session::run_behind(ahead, ahead_params, st, params, bound, answer);
  sql::Params both = params;
  sql::Rows waited;
  auto rows = conn_->run_behind(ahead, st, both.set(ahead_params), waited);
  answer = rows ? sql::ahead_answer(waited) : sql::AheadAnswer::untold;
  return rows;
}

}  // namespace dblock::mysql
