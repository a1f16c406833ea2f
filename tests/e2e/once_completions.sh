#!/usr/bin/env bash
# Shell completions (completions/): each loads in its shell and completes subcommands,
# options, strategy names, --on-lost values, -o column names and key names (from `dblock
# status`, of the database that -d, --dsn-file or --config on the line names); a DSN with a
# colon does not stop completion; a key is not offered again after the key or as -c's value;
# and every option and subcommand that `dblock --help` lists is in each of them.
source "$(dirname "$0")/lib.sh"

dir=$DBLOCK_SOURCE_DIR/completions
for tool in bash zsh fish; do
  command -v "$tool" >/dev/null || skip_or_fail "$tool is not installed (scripts/install-deps.sh)"
done
# The completions call `dblock` by name, as an installed one would be: lib.sh put it on PATH.
k=$(key compl)
assert_status "a key exists to be completed" 0 dblock run "$k" -- true
# A second database, named on the command line: -d, a --dsn-file or a --config file.
other=$E2E_TMP/other.db
kb=$(key other)
assert_status "a key exists in the other database" 0 dblock -d "sqlite:$other" run "$kb" -- true
printf 'sqlite:%s\n' "$other" >"$E2E_TMP/dsn"
chmod 600 "$E2E_TMP/dsn"
printf 'dsn = "sqlite:%s"\n' "$other" >"$E2E_TMP/dblock.conf"
# The column names of -o, as --help lists them.
columns_of() { dblock "$1" --help | sed -n 's/.*Columns to show, comma separated: //p' | tr -d ',' | xargs -n1 | sort | xargs; }
status_columns=$(columns_of status)
history_columns=$(columns_of history)
check "status --help lists columns" test -n "$status_columns"

# Everything --help lists, per subcommand, is known to each completion file.
subcommands=$(dblock --help | awk '/^Subcommands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }')
check "dblock --help lists subcommands" test -n "$subcommands"
for f in dblock.bash _dblock dblock.fish; do
  missing=""
  for sub in $subcommands; do grep -qw -- "$sub" "$dir/$f" || missing+=" $sub"; done
  for sub in "" $subcommands; do
    # shellcheck disable=SC2086
    for opt in $(dblock $sub --help 2>/dev/null | grep -oE '(^|[ ,])--?[a-zA-Z][a-zA-Z-]*' | tr -d ' ,' | sort -u); do
      case $f in
        dblock.fish) # fish spells them -s x / -l name
          name=${opt#-}; name=${name#-}
          if [[ $opt == --* ]]; then pat="-l $name"; else pat="-s $name"; fi
          grep -qF -- "$pat" "$dir/$f" || missing+=" $sub:$opt" ;;
        *) grep -qE -- "(^|[^a-zA-Z-])$opt([^a-zA-Z-]|$)" "$dir/$f" || missing+=" $sub:$opt" ;;
      esac
    done
  done
  assert_eq "$f knows every subcommand and option of --help" "" "$missing"
done

# bash: the function is registered by the file bash-completion would load, and completes.
# bash_complete WORD...: COMPREPLY for completing the last word. COMP_WORDS is split as readline
# splits a line, at the characters of COMP_WORDBREAKS as well (sqlite:/x is sqlite, :, /x).
bash_complete() {
  bash -c 'source /usr/share/bash-completion/bash_completion 2>/dev/null; source "$1"; shift
           COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMP_WORDS=()
           for w in "$@"; do
             while [[ $w =~ ^([^:=]*)([:=]+)(.*)$ ]]; do
               [ -n "${BASH_REMATCH[1]}" ] && COMP_WORDS+=("${BASH_REMATCH[1]}")
               COMP_WORDS+=("${BASH_REMATCH[2]}"); w=${BASH_REMATCH[3]}
             done
             COMP_WORDS+=("$w")
           done
           COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
           _dblock dblock "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"; printf "%s\n" "${COMPREPLY[@]}"' \
    _ "$dir/dblock.bash" "$@"
}
check "bash: complete -p shows the function" \
  eval "bash -i -c 'source $dir/dblock.bash; complete -p dblock' 2>/dev/null | grep -q -- '-F _dblock'"
assert_eq "bash: dblock ru -> run" run "$(bash_complete dblock ru)"
assert_eq "bash: --strategy values" "advisory for-update lease txn-insert" "$(bash_complete dblock --strategy '' | sort | xargs)"
assert_eq "bash: --on-lost values" "ignore terminate" "$(bash_complete dblock run k --on-lost '' | sort | xargs)"
# Output is captured before grep -q looks at it: under pipefail, a writer that outlives
# grep -q would fail the check with SIGPIPE.
check "bash: run --ttl is completed" grep -qx -- --ttl <<<"$(bash_complete dblock run --tt)"
check "bash: key names come from dblock status" grep -qx -- "$k" <<<"$(bash_complete dblock status '')"
check "bash: subcommands after -d sqlite:/..." grep -qx status <<<"$(bash_complete dblock -d "sqlite:$other" '')"
assert_eq "bash: keys of -d's database" "$kb" "$(bash_complete dblock -d "sqlite:$other" run '')"
assert_eq "bash: keys of --dsn-file's database" "$kb" "$(bash_complete dblock --dsn-file "$E2E_TMP/dsn" run '')"
# DBLOCK_DSN beats a config file's dsn: these run without it.
assert_eq "bash: keys of --config's database" "$kb" "$(unset DBLOCK_DSN; bash_complete dblock --config "$E2E_TMP/dblock.conf" run '')"
assert_eq "bash: keys of --dsn=...'s database" "$kb" "$(bash_complete dblock --dsn="sqlite:$other" status '')"
assert_eq "bash: no key after the key" "" "$(bash_complete dblock run "$k" '')"
assert_eq "bash: no key after run -w D KEY" "" "$(bash_complete dblock run -w 5s "$k" '')"
assert_eq "bash: no key as -c's value" "" "$(bash_complete dblock run "$k" -c '')"
assert_eq "bash: status -o column names" "$status_columns" "$(bash_complete dblock status -o '' | sort | xargs)"
assert_eq "bash: history -o column names" "$history_columns" "$(bash_complete dblock history -o '' | sort | xargs)"
assert_eq "bash: -o completes after a comma" "KEY,STATE KEY,STRATEGY" "$(bash_complete dblock status -o KEY,ST | sort | xargs)"

# zsh: through its line editor in a pseudo-terminal.
zsh_complete() { timeout 20 zsh -f "$DBLOCK_SOURCE_DIR/tests/e2e/zsh_complete.zsh" "$dir" "$1"; }
out=$(zsh_complete 'dblock --strategy ')
check "zsh: --strategy values" eval 'grep -q "advisory *for-update *lease *txn-insert" <<<"$out"'
out=$(zsh_complete 'dblock ru')
check "zsh: dblock ru -> dblock run" eval 'grep -q "dblock run" <<<"$out"'
out=$(zsh_complete 'dblock run k --on-lost ')
check "zsh: --on-lost values" eval 'grep -q "ignore *terminate" <<<"$out"'
out=$(zsh_complete 'dblock status ')
check "zsh: key names come from dblock status" eval 'grep -qF -- "$k" <<<"$out"'
out=$(zsh_complete "dblock -d sqlite:$other ")
check "zsh: subcommands after -d sqlite:/..." eval 'grep -q "status.*who holds" <<<"$out"'
for opt in "-d sqlite:$other" "--dsn-file $E2E_TMP/dsn" "--config $E2E_TMP/dblock.conf"; do
  out=$(unset DBLOCK_DSN; zsh_complete "dblock $opt run ")
  check "zsh: keys of ${opt%% *}'s database" eval 'grep -qF -- "$kb" <<<"$out" && ! grep -qF -- "$k" <<<"$out"'
done
out=$(zsh_complete "dblock run $kb ")
check "zsh: no key after the key" eval '! grep -qF -- "$k" <<<"$out"'
out=$(zsh_complete "dblock run $kb -c ")
check "zsh: no key as -c's value" eval '! grep -qF -- "$k" <<<"$out"'
out=$(zsh_complete 'dblock status -o ')
check "zsh: status -o column names" eval 'grep -q "EXPIRES-IN" <<<"$out" && grep -q "LAST-FINISH" <<<"$out"'
out=$(zsh_complete 'dblock history -o ')
check "zsh: history -o column names" eval 'grep -q "DURATION" <<<"$out" && grep -q "OUTCOME" <<<"$out"'
out=$(zsh_complete 'dblock status -o KEY,EXP')
check "zsh: -o completes after a comma" eval 'grep -q "KEY,EXPIRES-IN" <<<"$out"'

# fish: complete -C prints the candidates.
fish_complete() { fish -N -c "source $dir/dblock.fish; complete -C '$1'" | cut -f1; }
check "fish: dblock ru -> run" grep -qx run <<<"$(fish_complete "dblock ru")"
assert_eq "fish: --strategy values" "advisory for-update lease txn-insert" "$(fish_complete 'dblock --strategy ' | sort | xargs)"
assert_eq "fish: --on-lost values" "ignore terminate" "$(fish_complete 'dblock run k --on-lost ' | sort | xargs)"
check "fish: key names come from dblock status" grep -qxF -- "$k" <<<"$(fish_complete "dblock status ")"
check "fish: subcommands after -d sqlite:/..." grep -qx status <<<"$(fish_complete "dblock -d sqlite:$other ")"
assert_eq "fish: keys of -d's database" "$kb" "$(fish_complete "dblock -d sqlite:$other run ")"
assert_eq "fish: keys of --dsn-file's database" "$kb" "$(fish_complete "dblock --dsn-file $E2E_TMP/dsn run ")"
assert_eq "fish: keys of --config's database" "$kb" "$(unset DBLOCK_DSN; fish_complete "dblock --config $E2E_TMP/dblock.conf run ")"
assert_eq "fish: no key after the key" "" "$(fish_complete "dblock run $k ")"
assert_eq "fish: no key as -c's value" "" "$(fish_complete "dblock run $k -c ")"
assert_eq "fish: status -o column names" "$status_columns" "$(fish_complete 'dblock status -o ' | sort | xargs)"
assert_eq "fish: history -o column names" "$history_columns" "$(fish_complete 'dblock history -o ' | sort | xargs)"
assert_eq "fish: -o completes after a comma" "KEY,STATE KEY,STRATEGY" "$(fish_complete 'dblock status -o KEY,ST' | sort | xargs)"

finish
