# What `cmake --install` puts where, beyond the binary and the modules, and the Debian packages
# built from the same tree with `cpack` (scripts/build-packages.sh):
#   dblock           the executable (SQLite built in), man page, completions, examples
#   dblock-mysql     the MariaDB/MySQL module and, through its dependencies, libmariadb
#   dblock-postgres  the PostgreSQL module and, through its dependencies, libpq
# so a host that only uses SQLite installs no server client library.

# Compressed with -n (no name or time stamp), so the package is the same from build to build.
set(DBLOCK_MAN_GZ ${PROJECT_BINARY_DIR}/dblock.1.gz)
add_custom_command(OUTPUT ${DBLOCK_MAN_GZ}
                   COMMAND gzip -9nc ${PROJECT_SOURCE_DIR}/man/dblock.1 > ${DBLOCK_MAN_GZ}
                   DEPENDS ${PROJECT_SOURCE_DIR}/man/dblock.1 VERBATIM)
set(DBLOCK_CHANGELOG_GZ ${PROJECT_BINARY_DIR}/changelog.gz)
add_custom_command(OUTPUT ${DBLOCK_CHANGELOG_GZ}
                   COMMAND gzip -9nc ${PROJECT_SOURCE_DIR}/packaging/changelog > ${DBLOCK_CHANGELOG_GZ}
                   DEPENDS ${PROJECT_SOURCE_DIR}/packaging/changelog VERBATIM)
add_custom_target(dblock_install_files ALL DEPENDS ${DBLOCK_MAN_GZ} ${DBLOCK_CHANGELOG_GZ})

install(FILES ${DBLOCK_MAN_GZ} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT dblock)
install(FILES completions/dblock.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME dblock COMPONENT dblock)
install(FILES completions/_dblock DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions COMPONENT dblock)
install(FILES completions/dblock.fish DESTINATION ${CMAKE_INSTALL_DATADIR}/fish/vendor_completions.d
        COMPONENT dblock)
install(FILES examples/dblock.conf examples/crontab examples/nightly-report.service examples/nightly-report.timer
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/dblock/examples COMPONENT dblock)
foreach(component dblock mysql postgres)
  set(package dblock-${component})
  if(component STREQUAL dblock)
    set(package dblock)
  endif()
  install(FILES packaging/copyright ${DBLOCK_CHANGELOG_GZ} DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package}
          COMPONENT ${component})
endforeach()
# The default database directory for root (dblock(1), FILES). Only in the package: a plain
# `cmake --install` to a user's prefix must not need root.
install(DIRECTORY DESTINATION /var/lib/dblock COMPONENT dblock EXCLUDE_FROM_ALL
        DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME dblock)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL dblock mysql postgres)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "dblock maintainers <maintainers@dblock.invalid>")
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "")
# Dependencies on shared libraries are read off the binaries by dpkg-shlibdeps.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_DBLOCK_PACKAGE_NAME dblock)
# libsmartcols is loaded with dlopen when a table is printed (src/cli/output.cpp), so
# dpkg-shlibdeps cannot see it.
set(CPACK_DEBIAN_DBLOCK_PACKAGE_DEPENDS "libsmartcols1")
set(CPACK_DEBIAN_MYSQL_PACKAGE_NAME dblock-mysql)
set(CPACK_DEBIAN_POSTGRES_PACKAGE_NAME dblock-postgres)
# A module only loads into the executable of its own version (the ABI check in the registry).
set(CPACK_DEBIAN_MYSQL_PACKAGE_DEPENDS "dblock (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_POSTGRES_PACKAGE_DEPENDS "dblock (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_MYSQL_PACKAGE_SECTION database)
set(CPACK_DEBIAN_POSTGRES_PACKAGE_SECTION database)
# CPack indents the lines after the first itself; "." alone separates paragraphs.
set(CPACK_DEBIAN_DBLOCK_DESCRIPTION "run a job on exactly one host, using a shared SQL database as the lock
dblock runs a command while holding a named lock in a relational database
that a farm of servers shares: every host runs the same crontab, exactly one
host runs each job. Leases with a TTL and heartbeat, advisory locks,
SELECT FOR UPDATE or an uncommitted unique INSERT; a fencing token per
acquisition; run history; exit codes that scripts can rely on.
.
This package has the SQLite backend built in. Install dblock-mysql or
dblock-postgres for a MariaDB/MySQL or PostgreSQL database.")
set(CPACK_DEBIAN_MYSQL_DESCRIPTION "MariaDB/MySQL backend for dblock
The module that lets dblock use a MariaDB or MySQL database as its lock
(DSNs mysql://...). dblock loads it only when such a DSN is used.")
set(CPACK_DEBIAN_POSTGRES_DESCRIPTION "PostgreSQL backend for dblock
The module that lets dblock use a PostgreSQL database as its lock
(DSNs postgres://... and postgresql://...). dblock loads it only when such a
DSN is used.")
include(CPack)
