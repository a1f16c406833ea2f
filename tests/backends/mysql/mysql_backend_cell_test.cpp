// MySQL/MariaDB backend checks that need a server: errors carry the server's error number
// and SQLSTATE (decisions are made on those, never on message text, which lc_messages may
// translate), a statement missing a value never reaches the server, and a
// lease release that fails on a dead connection leaves the lease held, so that a retry (or
// the lease's expiry) ends it, as on PostgreSQL and SQLite.
#include <doctest/doctest.h>

#include <mysqld_error.h>

#include <string>

#include "backends/mysql/mysql_connection.hpp"
#include "backends/mysql/mysql_error.hpp"
#include "backends/registry.hpp"
#include "conformance/conformance_helpers.hpp"

using namespace dblock;
using namespace dblock::conformance;

namespace {

Dsn parsed(const std::string& text) {
  auto d = parse_dsn(text);
  REQUIRE_MESSAGE(d.has_value(), (d ? std::string() : d.error().message));
  return *d;
}

std::unique_ptr<mysql::Connection> admin_connection(const BackendOptions& options) {
  // The plain DSN's account, which may grant (the TLS cells' own may not).
  auto c = mysql::Connection::open(parsed(test::admin_dsn()), options);
  REQUIRE_MESSAGE(c.has_value(), (c ? std::string() : c.error().message));
  return std::move(*c);
}

// A server account of its own for one test, dropped at the end: locking it makes every
// reconnect of a locker that uses it fail, which nothing else on the server notices.
struct OwnAccount {
  OwnAccount(mysql::Connection& admin, const std::string& name) : admin_(admin) {
    auto host = admin.run({"test.account", "SELECT SUBSTRING_INDEX(CURRENT_USER(), '@', -1), DATABASE()"});
    REQUIRE(host);
    account = "'" + name + "'@'" + (*host)[0].text(0) + "'";
    const std::string database = (*host)[0].text(1);
    REQUIRE(admin.query("CREATE USER " + account + " IDENTIFIED BY 'own-pw'"));
    REQUIRE(admin.query("GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON `" + database + "`.* TO " + account));
    user = name;
    // The test DSN with this account's name and password instead of its own.
    const std::string base = test::dsn();
    const auto scheme = base.find("://");
    const auto at = base.find('@', scheme + 3);
    REQUIRE(scheme != std::string::npos);
    REQUIRE(at != std::string::npos);
    dsn = base.substr(0, scheme + 3) + name + ":own-pw" + base.substr(at);
  }
  ~OwnAccount() { (void)admin_.query("DROP USER IF EXISTS " + account); }

  // Ends every session of the account.
  void kill_sessions() {
    auto ids = admin_.run({"test.sessions", "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = :user"},
                          {{"user", user}});
    REQUIRE(ids);
    REQUIRE_FALSE(ids->empty());
    for (std::size_t i = 0; i < ids->size(); ++i) REQUIRE(admin_.query("KILL CONNECTION " + (*ids)[i].text(0)));
  }

  mysql::Connection& admin_;
  std::string account, user, dsn;
};

}  // namespace

TEST_SUITE("mysql") {
  TEST_CASE("mysql: KILL of a session the server does not know carries ER_NO_SUCH_THREAD and its SQLSTATE") {
    BackendOptions options;
    auto admin = admin_connection(options);
    // Messages in another language: the number is what tells this case apart.
    REQUIRE(admin->query("SET lc_messages = 'de_DE'"));
    auto r = admin->query("KILL CONNECTION 4000000000");
    REQUIRE_FALSE(r);
    CHECK(r.error().native_code == ER_NO_SUCH_THREAD);
    CHECK(r.error().sqlstate == "HY000");
    CHECK(r.error().kind == ErrorKind::no_session);
    CHECK(admin->run({"test.one", "SELECT 1"}));
  }

  TEST_CASE("mysql: a statement error carries its number and SQLSTATE and is classified by them") {
    BackendOptions options;
    auto admin = admin_connection(options);
    auto r = admin->run({"test.missing", "SELECT 1 FROM dblock_no_such_table_here WHERE name = :key"}, {{"key", "k"}});
    REQUIRE_FALSE(r);
    CHECK(r.error().native_code == ER_NO_SUCH_TABLE);
    CHECK(r.error().sqlstate == "42S02");
    CHECK(r.error().kind == ErrorKind::schema_missing);
  }

  TEST_CASE("mysql: a placeholder without a value is internal and never reaches the server") {
    BackendOptions options;
    auto admin = admin_connection(options);
    const sql::Statement st{"test.two", "SELECT :one, :two"};
    auto r = admin->run(st, {{"one", std::int64_t{1}}});
    REQUIRE_FALSE(r);
    CHECK(r.error().kind == ErrorKind::internal);
    CHECK(r.error().native_code == 0);
    // The same statement with every value runs, on the same connection.
    auto ok = admin->run(st, {{"one", std::int64_t{1}}, {"two", "two"}});
    REQUIRE(ok);
    CHECK((*ok)[0].text(1) == "two");
  }
}

TEST_SUITE("mysql.lease") {
  TEST_CASE("mysql: a lease release that fails on a dead connection keeps the lease; the retry releases it") {
    Db db;
    auto admin = admin_connection(db.options);
    OwnAccount own(*admin, test::unique_key("dbl").substr(0, 30));
    auto backend = open_backend(parsed(own.dsn), db.options);
    REQUIRE_MESSAGE(backend.has_value(), (backend ? std::string() : backend.error().message));
    auto made = (*backend)->make_locker(Strategy::lease);
    REQUIRE(made);
    auto& locker = **made;
    const std::string key = test::unique_key("release-retry");
    const std::int64_t token = acquire(locker, request(key, "a"));

    // The lease's connection dies and cannot come back: the release fails as a connection error.
    REQUIRE(admin->query("ALTER USER " + own.account + " ACCOUNT LOCK"));
    own.kill_sessions();
    auto failed = locker.release(ReleaseRequest{});
    REQUIRE_FALSE(failed);
    CHECK(failed.error().kind == ErrorKind::connection);
    LockStatus held = db.status(key);
    CHECK(held.state == LockStatus::State::held);
    CHECK(held.owner == "a");
    CHECK(held.token == token);

    // The locker still holds the lease, so the retried release finds it and ends it.
    REQUIRE(admin->query("ALTER USER " + own.account + " ACCOUNT UNLOCK"));
    auto retried = locker.release(ReleaseRequest{});
    REQUIRE_MESSAGE(retried.has_value(), (retried ? std::string() : retried.error().message));
    LockStatus freed = db.status(key);
    CHECK(freed.state == LockStatus::State::free);
    CHECK(freed.token == token);
  }
}
