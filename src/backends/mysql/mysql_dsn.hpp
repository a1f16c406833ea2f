#pragma once
// mysql://[user[:password]@]host[:port]/database[?param=value&...] (dblock(1), DSN): the
// parameters the MySQL backend understands, checked when the DSN is read.

#include <optional>
#include <string>

#include "backends/common/dsn.hpp"

namespace dblock::mysql {

struct MysqlDsn {
  std::string user;                     // percent-decoded; empty: the option file's
  std::optional<std::string> password;  // percent-decoded
  std::string host;
  std::optional<unsigned> port;
  std::string database;
  std::optional<std::string> socket, ssl_ca, ssl_cert, ssl_key, option_file;
  std::optional<std::string> ssl_mode;  // upper case, one of the five --ssl-mode names
  std::optional<unsigned> connect_timeout_s;
  std::string option_group = "dblock";
};

/// Parses and checks everything after the scheme; ErrorKind::config naming what is wrong.
Result<MysqlDsn> parse_mysql_dsn(const Dsn& dsn);

}  // namespace dblock::mysql
