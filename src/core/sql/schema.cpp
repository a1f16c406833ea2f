#include "core/sql/schema.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "core/sql/shedlock.hpp"
#include "core/sql/tables.hpp"

namespace dblock {

std::unexpected<Error> no_lock_database(std::string_view where) {
  return fail(ErrorKind::other, "no lock database at " + std::string(where) +
                                    " (nothing has run here yet, or the DSN is wrong; `dblock init` creates it)");
}

}  // namespace dblock

namespace dblock::sql {
namespace {

/// A table the session's statements use, the columns it must have and the unique key its
/// upserts rely on (none: any or no key).
struct Wanted {
  std::string table;
  std::vector<std::string_view> columns;
  std::vector<std::string> key;  // in the order of the DDL
  bool dblocks = true;  // one of dblock's own tables (not ShedLock's)
};

std::vector<Wanted> wanted_tables(const SchemaStatements& st) {
  std::vector<Wanted> out;
  for (const tables::Table* table : tables::all) {
    // Only the tables the dialect makes: its statements use no other (SQLite: no claims).
    if (!st.makes(st.prefix + std::string(table->suffix))) continue;
    Wanted w{st.prefix + std::string(table->suffix), {}, {table->key.begin(), table->key.end()}};
    // Those of its first shape; the later ones are added (SchemaStatements::added).
    for (const tables::Column& c : table->columns)
      if (c.since == tables::first_shape) w.columns.push_back(c.name);
    out.push_back(std::move(w));
  }
  if (!st.shedlock_table.empty())
    out.push_back({st.shedlock_table, {shedlock::columns.begin(), shedlock::columns.end()}, {"name"}, false});
  return out;
}

bool has(const Columns& found, const std::string& table, std::string_view column) {
  auto t = found.find(table);
  return t != found.end() && t->second.columns.contains(std::string(column));
}

template <class Names>
std::string listed(const Names& columns) {
  std::string out;
  for (const auto& c : columns) out += (out.empty() ? "" : ", ") + (c.empty() ? std::string("an expression") : c);
  return "(" + out + ")";
}

/// Two runs of one key must meet on one row: an upsert (ON DUPLICATE KEY UPDATE, ON CONFLICT)
/// finds the key's row only through a unique key on exactly w.key. A key with more columns
/// (name, owner) gave each holder a row of its own, each with token 1; a unique key on other
/// columns makes one key's upsert take another key's row. A superset of w.key next to it is
/// harmless. And a name or token column that cannot hold what dblock writes (a shorter
/// varchar, a 32-bit token) truncates, merges or fails.
Result<void> check_keys(const Wanted& w, const TableShape& t, const std::string& where, const std::string& dialect) {
  const std::string fix = " (the fix: CREATE UNIQUE INDEX " + w.table + "_key ON " + w.table + " " + listed(w.key) +
                          ", after removing rows that repeat it; or the table as `dblock schema --dialect " + dialect +
                          "` makes it)";
  if (!w.key.empty()) {
    const std::set<std::string> wanted(w.key.begin(), w.key.end());
    bool found = false;
    for (const auto& [name, columns] : t.keys) {
      if (columns == wanted) found = true;
      if (!std::includes(columns.begin(), columns.end(), wanted.begin(), wanted.end()))
        return fail(ErrorKind::config, "table " + w.table + where + " has a unique key " + listed(columns) +
                                           " that is not on " + listed(w.key) +
                                           ": one key's lock would take another's row; drop it (DROP INDEX or ALTER TABLE)");
    }
    if (!found) {
      std::string keys;
      for (const auto& [name, columns] : t.keys) keys += (keys.empty() ? "" : ", ") + listed(columns);
      return fail(ErrorKind::config, "table " + w.table + where + " has no primary key or unique index on exactly " +
                                         listed(w.key) + " (its unique keys: " + (keys.empty() ? "none" : keys) +
                                         "): two holders of one lock would each get a row of their own" + fix);
    }
  }
  for (const auto& [column, c] : t.columns)
    if (!c.fits)
      return fail(ErrorKind::config, "table " + w.table + where + ": column " + column + " has the type " + c.type +
                                         ", which cannot hold every " + (column == "token" ? "token" : "lock name") +
                                         " (" + (column == "token" ? "a 64-bit integer" : "text of 255 bytes") +
                                         " is needed; see `dblock schema --dialect " + dialect + "`)");
  return {};
}

/// The first table that exists with another shape (ErrorKind::config naming it and the column
/// or key); with `all`, a table that does not exist is one too.
Result<void> check_shape(const Session& session, const SchemaStatements& st, const Columns& found, bool all) {
  const std::string where = " in " + session.where();
  for (const Wanted& w : wanted_tables(st)) {
    auto t = found.find(w.table);
    if (t == found.end()) {
      if (all) return fail(ErrorKind::config, "table " + w.table + where + " is missing after it was created");
      continue;
    }
    for (std::string_view column : w.columns) {
      if (t->second.columns.contains(std::string(column))) continue;
      if (!w.dblocks)
        return fail(ErrorKind::config,
                    "table " + w.table + where + " is not a ShedLock table: column " + std::string(column) + " is missing");
      return fail(ErrorKind::config, "table " + w.table + where + " has no column " + std::string(column) +
                                         " (an unexpected shape: it was not made by dblock; see `dblock schema --dialect " +
                                         st.dialect + "`)");
    }
    if (auto ok = check_keys(w, t->second, where, st.dialect); !ok) return ok;
  }
  return {};
}

bool complete(const SchemaStatements& st, const Columns& found) {
  for (const Wanted& w : wanted_tables(st))
    for (std::string_view column : w.columns)
      if (!has(found, w.table, column)) return false;
  for (const auto& added : st.added)
    if (!has(found, added.table, added.column)) return false;
  return true;
}

/// Adds the columns an older <prefix>locks lacks. A racer may have added one first (a dialect
/// whose DDL takes no transaction): what counts is that the column is there afterwards. A user
/// who may not alter the table (a DBA's tables) is told the statement a DBA runs.
Result<void> add_columns(Session& session, const SchemaStatements& st, const Columns& found) {
  for (const auto& added : st.added) {
    if (has(found, added.table, added.column)) continue;
    auto ok = session.exec(added.add);
    if (ok) continue;
    auto now = read_columns(session);
    if (now && has(*now, added.table, added.column)) continue;
    Error e = ok.error();
    if (e.kind == ErrorKind::other) e.kind = ErrorKind::config;
    e.message = "table " + added.table + " in " + session.where() + " was made by an older dblock and lacks the column " +
                added.column + ", which could not be added (" + e.message + "); a user who may alter it runs: " +
                added.add + " (or applies `dblock schema` again)";
    return std::unexpected(e);
  }
  return {};
}

/// A table of the session's read in another namespace of the database (SchemaStatements::columns'
/// third kind of row): its name, that namespace and the connection's own.
struct Elsewhere {
  std::string table, there, here;
  auto operator<=>(const Elsewhere&) const = default;
};

/// What SchemaStatements::columns reads: the tables here, and those of them in another namespace.
struct Shapes {
  Columns found;
  std::set<Elsewhere> elsewhere;  // in order of table, then namespace: the first one is named
};

/// Refuses to make <prefix>locks, or ShedLock's table, where another of it is already in the
/// database under another namespace (`now.elsewhere`): a host whose setting picks one would not
/// exclude a host (or a Java service) whose setting picks the other, so every key would have two
/// holders. `before`: the tables here before any was made (one that was there already is used,
/// not made). Judged on the read before the DDL's turn (a refusal at once) and again on the read
/// after the DDL in that turn, which sees what an earlier turn committed; its refusal rolls the
/// DDL back.
Result<void> check_elsewhere(const Session& session, const SchemaStatements& st, const Columns& before, const Shapes& now) {
  const std::string locks = st.prefix + "locks";
  for (const Elsewhere& e : now.elsewhere) {
    if (before.contains(e.table)) continue;
    return fail(ErrorKind::config,
                "table " + e.table + " is in schema " + e.there + " of " + session.where() +
                    ", and this connection's search_path would make a second one in schema " + e.here +
                    ": hosts on the two would not exclude each other (refused). Give every host the same search_path "
                    "(options=-csearch_path%3D" + e.there + " in the DSN, or ALTER ROLE ... SET search_path)" +
                    (e.table == locks ? ", or another --table-prefix for locks of their own" : ""));
  }
  return {};
}

/// Makes the tables that are missing, only those: a table that exists gets no DDL (its user may
/// have no right to any).
Result<void> create(Session& session, const SchemaStatements& st, const Columns& found) {
  for (const auto& ddl : st.create) {
    if (found.contains(ddl.table)) continue;
    auto ok = session.exec(ddl.sql);
    if (ok) continue;
    // Creating tables fails for want of a privilege or on a foreign object: the setup's to fix.
    Error e = ok.error();
    if (e.kind == ErrorKind::other) e.kind = ErrorKind::config;
    e.message = "cannot create the dblock table " + ddl.table + " in " + session.where() + ": " + e.message +
                " (a user who may create tables makes them: `dblock init`, or the DDL `dblock schema` prints)";
    return std::unexpected(e);
  }
  return {};
}

/// What `dblock schema` says about each table above its DDL.
std::string table_note(const SchemaStatements& st, const std::string& table) {
  for (const tables::Table* t : tables::all)
    if (table == st.prefix + std::string(t->suffix))
      return std::string(t->note) + (t == &tables::locks && !st.failover_record.empty()
                                         ? " Also the failover record (below)."
                                         : "");
  return "ShedLock's own table, as ShedLock documents it (its Java services may have made it).";
}

/// SchemaStatements::columns of the session's tables, read only.
Result<Shapes> read_shapes(Session& session) {
  const SchemaStatements& st = *session.schema();
  auto r = session.run(st.columns, {{"locks", st.prefix + "locks"},
                                    {"runs", st.prefix + "runs"},
                                    {"claims", st.makes(st.prefix + "claims") ? st.prefix + "claims" : std::string()},
                                    {"shedlock", st.shedlock_table}});
  if (!r) return std::unexpected(r.error());
  Shapes out;
  Columns& found = out.found;
  for (std::size_t i = 0; i < r->size(); ++i) {
    const auto row = (*r)[i];
    if (row.is_null(2)) found[row.text(0)].columns[row.text(1)] = {row.opt_int64(3).value_or(1) != 0, row.text(4)};
  }
  // A table is there when its columns are: where the catalog is no snapshot (MySQL), a table
  // made while the statement ran may show its keys and not yet its columns.
  for (std::size_t i = 0; i < r->size(); ++i) {
    const auto row = (*r)[i];
    if (row.is_null(2)) continue;
    if (!row.is_null(4)) out.elsewhere.insert({row.text(0), row.text(2), row.text(4)});
    else if (auto t = found.find(row.text(0)); t != found.end()) t->second.keys[row.text(2)].insert(row.text(1));
  }
  return out;
}

}  // namespace

Result<Columns> read_columns(Session& session) {
  auto read = read_shapes(session);
  if (!read) return std::unexpected(read.error());
  return std::move(read->found);
}

Result<void> ensure_schema(Session& session) {
  const SchemaStatements& st = *session.schema();
  auto read = read_shapes(session);
  if (!read) return std::unexpected(read.error());
  const Columns before = read->found;
  // The common case, every table there: one read, nothing written (no commit, no fsync).
  if (auto ok = check_shape(session, st, before, false); !ok) return ok;
  if (complete(st, before)) return {};
  if (auto ok = check_elsewhere(session, st, before, *read); !ok) return ok;
  // One transaction where the dialect has one for DDL: processes creating at once take turns,
  // and a table of the wrong shape, or one made beside another namespace's, leaves nothing
  // behind.
  std::optional<Transaction> tx;
  if (!st.begin.empty()) {
    auto begun = Transaction::begin(session, st.begin);
    if (!begun) return std::unexpected(begun.error());
    tx.emplace(std::move(*begun));
  }
  if (auto ok = create(session, st, before); !ok) return ok;
  read = read_shapes(session);
  if (!read) return std::unexpected(read.error());
  if (auto ok = check_elsewhere(session, st, before, *read); !ok) return ok;
  if (auto ok = check_shape(session, st, read->found, true); !ok) return ok;
  if (auto ok = add_columns(session, st, read->found); !ok) return ok;
  return tx ? tx->commit() : Result<void>();
}

Result<void> check_schema(Session& session) {
  const SchemaStatements& st = *session.schema();
  auto found = read_columns(session);
  if (!found) return std::unexpected(found.error());
  for (const Wanted& w : wanted_tables(st))
    if (w.dblocks && !found->contains(w.table)) return no_lock_database(session.where());
  if (auto ok = check_shape(session, st, *found, false); !ok) return ok;
  for (const auto& added : st.added)
    if (added.described->required && !has(*found, added.table, added.column))
      return fail(ErrorKind::config, "table " + added.table + " in " + session.where() +
                                         " was made by an older dblock and lacks the column " + added.column +
                                         "; the next `dblock run` or `dblock init` adds it");
  return {};
}

std::string schema_sql(const SchemaStatements& st) {
  // What a DBA reviews: idempotent, so it can be applied again (after a failure, or to add a
  // column to an older dblock's table), and in one transaction where DDL has one.
  const bool transaction = !st.begin.empty();
  std::string out =
      "-- dblock's tables (" + st.dialect + ", table prefix " + st.prefix + "), for a DBA to review and apply as a\n"
      "-- user who may create tables. Idempotent: each statement makes only what is missing, so\n"
      "-- applying it again changes nothing. The application's user then needs no CREATE, ALTER or\n"
      "-- DROP, only SELECT, INSERT, UPDATE and DELETE on these tables: dblock(1) PRIVILEGES says\n"
      "-- what each strategy needs.\n";
  out += transaction ? "BEGIN;\n"
                     : "-- No BEGIN/COMMIT: " + st.dialect + " commits each CREATE TABLE on its own (DDL is not\n"
                           "-- transactional here).\n-- After a failure, apply it again: what was made stays, the rest is made.\n";
  std::string last;
  for (const auto& ddl : st.create) {
    if (ddl.table != last) out += "\n-- " + ddl.table + ": " + table_note(st, ddl.table) + "\n";
    last = ddl.table;
    out += ddl.sql + ";\n";
  }
  if (!st.added.empty()) {
    out += "\n-- Columns added since the first release, for the tables an older dblock made:\n";
    for (const auto& added : st.added) {
      if (added.add.find("IF NOT EXISTS") != std::string::npos) {
        out += added.add + ";\n";
        continue;
      }
      out += "-- only where " + added.column + " is missing (its ALTER TABLE has no IF NOT EXISTS here):\n-- " +
             added.add + ";\n";
    }
  }
  if (!st.failover_record.empty()) {
    out += "\n-- The failover record (dblock(1), Failover lock-delay): a row of " + st.prefix +
           "locks that records this\n-- server's incarnation, so that after a promotion nothing is granted for the "
           "longest TTL\n-- recorded. Made once, here or by the first run.";
    out += "\n" + st.failover_record + ";\n";
  }
  if (transaction) out += "COMMIT;\n";
  return out;
}

Result<bool> Session::repair_schema(const Error& failed) {
  if (!schema_ || failed.kind != ErrorKind::schema_missing) return false;
  if (auto ok = ensure_schema(*this); !ok) return std::unexpected(ok.error());
  return true;
}

}  // namespace dblock::sql
