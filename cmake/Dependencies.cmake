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

# util-linux's table library (lsblk, findmnt): status and history tables.
pkg_check_modules(SMARTCOLS REQUIRED IMPORTED_TARGET smartcols)
