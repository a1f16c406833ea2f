#include "core/sql/tables.hpp"

#include <algorithm>
#include <functional>
#include <set>

#include "core/sql/identifiers.hpp"
#include "core/sql/statements.hpp"

namespace dblock::sql::tables {
namespace {

bool is_key(const Table& table, std::string_view column) { return std::ranges::find(table.key, column) != table.key.end(); }

std::string listed(std::span<const std::string_view> columns) {
  std::string out;
  for (std::string_view c : columns) out += (out.empty() ? "" : ", ") + std::string(c);
  return out;
}

/// The column's definition after its name, as CREATE TABLE and ALTER TABLE write it.
std::string definition(const Table& table, const Column& c, const SchemaDialect& d) {
  if (c.type == Type::id) return d.identity;
  std::string out = d.type(c.type) + (c.not_null ? " NOT NULL" : d.nullable);
  if (!c.default_sql.empty()) out += " DEFAULT " + std::string(c.default_sql);
  // A key of one column is said on the column; a key of several, after the columns.
  if (table.key.size() == 1 && is_key(table, c.name)) {
    out += " PRIMARY KEY";
    if (c.type == Type::name)
      if (std::string check = d.name_check(c.name); !check.empty()) out += " " + check;
  }
  return out;
}

/// CREATE TABLE IF NOT EXISTS, one column a line, a column's comment on the line above it
/// (a line of the DDL stays short enough to read whole).
std::string create_table(const Table& table, const SchemaDialect& d, const std::string& quoted,
                         const std::string& inline_index) {
  std::vector<std::string> lines;
  std::set<Type> typed;
  for (const Column& c : columns_of(table, d)) {
    std::string comment(c.comment);
    if (comment.empty() && !typed.contains(c.type)) comment = d.type_comment(c.type);
    typed.insert(c.type);
    lines.push_back((comment.empty() ? "" : "-- " + comment + "\n  ") + std::string(c.name) + " " +
                    definition(table, c, d));
  }
  if (table.key.size() > 1) lines.push_back("PRIMARY KEY (" + listed(table.key) + ")");
  if (!inline_index.empty()) lines.push_back(inline_index);
  std::string out = "CREATE TABLE IF NOT EXISTS " + quoted + " (\n";
  for (std::size_t i = 0; i < lines.size(); ++i) out += "  " + lines[i] + (i + 1 < lines.size() ? ",\n" : "\n");
  return out + ")" + d.table_options;
}

/// What a table of the shape before `before` has of `c` in a derived table: the column, NULL for
/// a required one that came later, nothing for one that only what uses it asks for.
std::string read_column(const Column& c, int before) {
  if (c.since == first_shape || (c.since < before && c.required)) return std::string(c.name);
  if (c.required) return "NULL AS " + std::string(c.name);
  return {};
}

}  // namespace

std::vector<Column> columns_of(const Table& table, const SchemaDialect& d) {
  std::vector<Column> out(table.columns.begin(), table.columns.end());
  if (&table == &locks) out.insert(out.end(), d.own_columns.begin(), d.own_columns.end());
  std::ranges::stable_sort(out, {}, &Column::since);
  return out;
}

SchemaStatements schema_statements(const SchemaDialect& d, const BackendOptions& options, std::string_view dialect_name,
                                   std::span<const Strategy> strategies) {
  SchemaStatements s(options, dialect_name);
  const bool sessions = std::ranges::any_of(strategies, is_session_strategy);
  std::vector<std::pair<int, SchemaStatements::Added>> added;
  for (const Table* table : all) {
    if (table->sessions_only && !sessions) continue;
    const std::string name = options.table_prefix + std::string(table->suffix);
    const std::string quoted = quote_identifier(name, d.quote);
    std::string inline_index, index;
    if (!table->index.empty()) {
      const std::string index_name = quote_identifier(name + "_" + std::string(table->index_name), d.quote);
      inline_index = d.inline_index(index_name, listed(table->index));
      if (inline_index.empty()) index = d.index(index_name, quoted, listed(table->index));
    }
    s.create.push_back({name, create_table(*table, d, quoted, inline_index)});
    if (!index.empty()) s.create.push_back({name, index});
    // The descriptions themselves (static, as Added::described points to them), the table's and
    // then the dialect's own, in columns_of's order once sorted below.
    const std::span<const Column> own = table == &locks ? d.own_columns : std::span<const Column>();
    for (std::span<const Column> described : {table->columns, own})
      for (const Column& c : described)
        if (c.since != first_shape)
          added.push_back({c.since, {name, std::string(c.name),
                                     "ALTER TABLE " + quoted + " " + d.add_column + " " + std::string(c.name) + " " +
                                         definition(*table, c, d),
                                     &c}});
  }
  // The ALTERs in the order their columns came.
  std::ranges::stable_sort(added, {}, &std::pair<int, SchemaStatements::Added>::first);
  for (auto& [since, a] : added) s.added.push_back(std::move(a));
  return s;
}

std::vector<OlderShape> older_shapes(const SchemaDialect& d) {
  std::set<int, std::greater<>> shapes;
  for (const Table* table : all)
    for (const Column& c : columns_of(*table, d))
      if (c.since != first_shape && c.required) shapes.insert(c.since);
  std::vector<OlderShape> out;
  for (int before : shapes) {
    OlderShape shape{before, {}};
    for (const Table* table : all)
      for (const Column& c : columns_of(*table, d))
        if (c.since >= before && c.required) shape.lacks.emplace_back(std::string(table->suffix), std::string(c.name));
    out.push_back(std::move(shape));
  }
  return out;
}

std::string read_as_before(const Table& table, const SchemaDialect& d, const std::string& quoted, int before) {
  std::string columns;
  bool lacks = false;
  for (const Column& c : columns_of(table, d)) {
    const std::string read = read_column(c, before);
    lacks = lacks || read != c.name;
    if (!read.empty()) columns += (columns.empty() ? "" : ", ") + read;
  }
  if (!lacks) return quoted;
  return "(SELECT " + columns + " FROM " + quoted + ")";
}

}  // namespace dblock::sql::tables
