# Debian 12 packages: see scripts/install-deps.sh.
find_package(Threads REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(PostgreSQL REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json 3 CONFIG REQUIRED)
find_package(doctest CONFIG REQUIRED)

# libmysqlclient (or MariaDB's drop-in libmariadb) ships pkg-config files, not a CMake package.
find_package(PkgConfig REQUIRED)
pkg_search_module(MYSQLCLIENT REQUIRED IMPORTED_TARGET mysqlclient libmariadb)
add_library(dblock::mysqlclient ALIAS PkgConfig::MYSQLCLIENT)

# The client library each server module is built against, as `dblock --version` prints it
# without loading the module (the same text the module's client_version() gives at run time;
# tests/backends/registry_test.cpp compares them). MariaDB Connector/C numbers itself 3.x;
# libmysqlclient carries the server's version.
if(MYSQLCLIENT_VERSION VERSION_LESS 5)
  set(DBLOCK_MYSQL_CLIENT "libmariadb ${MYSQLCLIENT_VERSION}")
else()
  set(DBLOCK_MYSQL_CLIENT "libmysqlclient ${MYSQLCLIENT_VERSION}")
endif()
set(DBLOCK_POSTGRES_CLIENT "libpq ${PostgreSQL_VERSION_STRING}")

# util-linux's table library (lsblk, findmnt): status and history tables.
pkg_check_modules(SMARTCOLS REQUIRED IMPORTED_TARGET smartcols)
