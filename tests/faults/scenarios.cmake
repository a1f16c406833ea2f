# The fault scenarios and the cells each applies to (see dblock_fault_test in ../CMakeLists.txt).
# One line per scenario, so parallel work on new scenarios merges without conflicts.
dblock_fault_test(oracle_selftest "sqlite:lease")
dblock_fault_test(frozen_proxy "${SERVER_CELLS}")
dblock_fault_test(idle_limit "${SESSION_CELLS}")
dblock_fault_test(proxy_selftest "${SERVER_CELLS}")
