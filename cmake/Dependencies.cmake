# Debian 12 packages: see scripts/install-deps.sh.
find_package(Threads REQUIRED)
find_package(SQLite3 REQUIRED)
# SQLite linked into the executable when its static library is there (Debian's libsqlite3-dev
# ships one): the dynamic loader's relocation of libsqlite3.so's symbols was a fifth of the
# instructions of a SQLite run's main process, and --gc-sections drops the SQLite code dblock
# never calls (docs/performance.md, SQLite). The executable then carries the SQLite it was
# built with, as it carries libstdc++ (`dblock --version` names it); OFF links the shared one.
option(DBLOCK_STATIC_SQLITE "Link SQLite into the executable when libsqlite3.a is found (faster start-up)" ON)
add_library(dblock::sqlite3 INTERFACE IMPORTED)
find_library(DBLOCK_SQLITE3_ARCHIVE NAMES libsqlite3.a)
if(DBLOCK_STATIC_SQLITE AND DBLOCK_SQLITE3_ARCHIVE AND NOT DBLOCK_SANITIZE)
  target_include_directories(dblock::sqlite3 INTERFACE ${SQLite3_INCLUDE_DIRS})
  target_link_libraries(dblock::sqlite3 INTERFACE ${DBLOCK_SQLITE3_ARCHIVE} Threads::Threads m ${CMAKE_DL_LIBS})
  set(DBLOCK_SQLITE_LINK static)  # tests/e2e/once_sqlite_run_cost.sh
else()
  target_link_libraries(dblock::sqlite3 INTERFACE SQLite::SQLite3)
  set(DBLOCK_SQLITE_LINK shared)
endif()
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
