#!/usr/bin/env bash
# Builds the Debian packages dblock, dblock-mysql and dblock-postgres from a build tree
# (default build/, made by the README's build command) into BUILD/packages/.
#   scripts/build-packages.sh [BUILD_DIR]
#   apt install ./build/packages/dblock_*.deb [./build/packages/dblock-postgres_*.deb]
set -euo pipefail
build=$(cd "${1:-$(dirname "$0")/../build}" && pwd)
cmake --build "$build" --target dblock
mkdir -p "$build/packages"
cd "$build/packages"
cpack --config "$build/CPackConfig.cmake" -B "$build/packages" >cpack.log 2>&1 || { cat cpack.log >&2; exit 1; }
rm -rf _CPack_Packages cpack.log
ls -l "$build"/packages/*.deb
