# The fault scenarios and the cells each applies to (see dblock_fault_test in ../CMakeLists.txt).
# One line per scenario, so parallel work on new scenarios merges without conflicts.
dblock_fault_test(oracle_selftest "sqlite:lease")
dblock_fault_test(kill9_tree "${ALL_CELLS}")
dblock_fault_test(sqlite_clock_step "sqlite:lease")
dblock_fault_test(sqlite_full_fs "sqlite:lease")
dblock_fault_test(session_killed "${SESSION_CELLS}")
dblock_fault_test(pause "${ALL_CELLS}")
dblock_fault_test(many_waiters "${ALL_CELLS}")
dblock_fault_test(waiters_restart "${SERVER_CELLS}" SERIAL)
dblock_fault_test(waiters_max_connections "${SERVER_CELLS}" SERIAL)
dblock_fault_test(server_restart "${SERVER_CELLS}" SERIAL)
