#include "backends/postgres/postgres_dsn.hpp"

#include <libpq-fe.h>

#include <memory>
#include <string>

namespace dblock::postgres {
namespace {

struct ConninfoDeleter {
  void operator()(PQconninfoOption* o) const { PQconninfoFree(o); }
};

}  // namespace

Result<void> check_postgres_dsn(const Dsn& dsn) {
  if (!dsn.text.starts_with("postgres://") && !dsn.text.starts_with("postgresql://"))
    return invalid_dsn(dsn, "expected postgres://[user[:password]@]host[:port]/database");
  char* err = nullptr;
  std::unique_ptr<PQconninfoOption, ConninfoDeleter> parsed(PQconninfoParse(dsn.text.c_str(), &err));
  if (parsed) return {};
  std::string why = err ? err : "out of memory";
  if (err) PQfreemem(err);
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  // libpq quotes the offending token ("invalid percent-encoded token: ..."), which may be the
  // password; invalid_dsn hides it.
  return invalid_dsn(dsn, why);
}

}  // namespace dblock::postgres
