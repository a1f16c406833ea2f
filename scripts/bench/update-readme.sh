#!/usr/bin/env bash
# Puts a bench run's figures into README.md: the table from OUTDIR/bench.txt between the
# bench-table markers, and OUTDIR/handoff.png and storm.png into docs/bench/ (which README shows).
#   scripts/bench/update-readme.sh [OUTDIR]        default: build/bench
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$root/build/bench}
[ -s "$dir/bench.txt" ] || { echo "update-readme.sh: no $dir/bench.txt (run scripts/bench.sh first)" >&2; exit 66; }
if ! grep -q '^<!-- bench-table:start -->$' "$root/README.md" || ! grep -q '^<!-- bench-table:end -->$' "$root/README.md"; then
  echo "update-readme.sh: README.md lacks the bench-table markers" >&2
  exit 65
fi
python3 - "$root/README.md" "$dir/bench.txt" <<'PY'
import sys
readme, table = sys.argv[1], open(sys.argv[2]).read().rstrip("\n")
text = open(readme).read()
head, rest = text.split("<!-- bench-table:start -->\n", 1)
_, tail = rest.split("<!-- bench-table:end -->\n", 1)
open(readme, "w").write(head + "<!-- bench-table:start -->\n```text\n" + table + "\n```\n<!-- bench-table:end -->\n" + tail)
PY
for chart in handoff storm; do
  if [ -s "$dir/$chart.png" ]; then
    mkdir -p "$root/docs/bench"
    cp "$dir/$chart.png" "$root/docs/bench/$chart.png"
  fi
done
echo "README.md and docs/bench/{handoff,storm}.png updated from $dir" >&2
