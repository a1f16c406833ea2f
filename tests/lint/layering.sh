#!/usr/bin/env bash
# Dependencies point one way: cli -> backends -> core. src/core names nothing of src/backends,
# not even in a comment (a pointer there is how an include starts), and no database product in
# a string it writes; every strategy is written once in src/core/sql, so no Locker class lives
# in src/backends; and the code of src/cli names no backend and no identifier quote: what it
# needs of a backend comes from the registry, so a new backend changes no file of cli.
#
# A backend's name is a folder of src/backends (but common/) or a DSN scheme its descriptor
# lists; cli "names" one when a string literal is exactly that word. Text a user reads may
# still show DSN schemes ("mysql://..."), and comments are not code.
set -u
src=${1:-${DBLOCK_SOURCE_DIR:?usage: layering.sh SOURCE_DIR}}/src
status=0

if hits=$(grep -rn 'backends/' "$src/core"); then
  echo "src/core names src/backends:"
  echo "$hits"
  status=1
fi

# Nor does a message core writes name a database product: a user of one backend must not read
# about another's mechanism (doctor once explained MySQL users' polling by PostgreSQL's LISTEN).
for file in "$src"/core/*.cpp "$src"/core/*.hpp "$src"/core/*/*.cpp "$src"/core/*/*.hpp; do
  if hits=$(sed 's|//.*||' "$file" | grep -nE '"[^"]*(PostgreSQL|MySQL|MariaDB|SQLite)[^"]*"'); then
    echo "${file#"$src"/} names a database product in a string:"
    echo "$hits"
    status=1
  fi
done

if hits=$(grep -rnE 'class [A-Za-z_]*Locker\b' "$src/backends"); then
  echo "a Locker in src/backends (strategies are written once, in src/core/sql):"
  echo "$hits"
  status=1
fi

mapfile -t dirs < <(find "$src/backends" -mindepth 1 -maxdepth 1 -type d ! -name common -printf '%f\n' | sort)
if ((${#dirs[@]} == 0)); then
  echo "no backend folders under $src/backends"
  exit 1
fi
mapfile -t schemes < <(cat "$src"/backends/*/*_descriptor.hpp 2>/dev/null | grep -h 'schemes{' |
                       grep -o '"[a-z0-9]*"' | tr -d '"' | sort -u)
words=$(printf '%s\n' "${dirs[@]}" "${schemes[@]}" | grep -v '^$' | sort -u | paste -sd '|')
dir_words=$(printf '%s\n' "${dirs[@]}" | paste -sd '|')

for file in "$src"/cli/*.cpp "$src"/cli/*.hpp; do
  # Line numbers kept; everything from // on dropped (a comment, or the rest of a DSN example).
  if hits=$(sed 's|//.*||' "$file" | grep -nE "\"($words)\"|'\`'|quote_identifier|#include \"backends/($dir_words)/"); then
    echo "${file#"$src"/} names a backend or its quoting:"
    echo "$hits"
    status=1
  fi
done

exit $status
