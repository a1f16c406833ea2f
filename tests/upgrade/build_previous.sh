#!/usr/bin/env bash
# Builds the previous release of dblock for the rolling-upgrade tests (tests/upgrade/): the
# commit NEWS names as the release before this one, checked out from this clone's history.
#   build_previous.sh SOURCE_DIR OUT_DIR
# On success OUT_DIR/dblock (with its modules beside it) and OUT_DIR/commit exist. On failure
# (no such commit in a shallow clone, a failed build) OUT_DIR/unavailable says why and the
# script still exits 0: the build of the current version goes on, and every upgrade test fails
# (CI) or skips (a developer's run) with that reason instead.
set -uo pipefail
source_dir=$1 out=$2

# The release before this one (NEWS: 0.1.0). Pinned by commit, not by tag, so that a clone
# without tags builds the same code.
commit=b2086f5273e8553d8f1c086b4db21f820fa1f8b1

mkdir -p "$out"
if [ -x "$out/dblock" ] && [ "$(cat "$out/commit" 2>/dev/null)" = "$commit" ]; then
  exit 0
fi
rm -rf "$out/src" "$out/build" "$out/dblock" "$out"/dblock-*.so "$out/commit" "$out/unavailable"

unavailable() {
  echo "$1" >"$out/unavailable"
  echo "build_previous.sh: $1" >&2
  exit 0
}

# A clone that shares this one's objects (no copy) with a .git of its own, so the old build's
# `dblock --version` names its own commit, not the enclosing checkout's.
git clone -q --shared --no-checkout "$source_dir" "$out/src" 2>"$out/build.log" &&
  git -C "$out/src" -c advice.detachedHead=false checkout -q "$commit" 2>>"$out/build.log" ||
  unavailable "the previous release (commit $commit) is not in this clone's history (a shallow clone?): run 'git fetch --unshallow' and build again; $out/build.log has git's message"

# What the tests need is its behaviour, not its speed: -O1 without debug information builds
# in about half the CPU time of RelWithDebInfo.
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
{
  cmake -S "$out/src" -B "$out/build" -G Ninja -DDBLOCK_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=None \
    -DCMAKE_CXX_FLAGS=-O1 -DCMAKE_C_FLAGS=-O1 "${launcher[@]}" &&
    ninja -C "$out/build" dblock dblock-mysql dblock-postgres
} >>"$out/build.log" 2>&1 || unavailable "the previous release (commit $commit) did not build: $out/build.log"

cp "$out/build/dblock" "$out/build"/dblock-*.so "$out/" && echo "$commit" >"$out/commit"
