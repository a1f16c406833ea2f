#!/usr/bin/env bash
# Shell completions (completions/): each loads in its shell and completes subcommands,
# options, strategy names, --on-lost values and key names (from `dblock status`); and every
# option and subcommand that `dblock --help` lists is in each of them.
source "$(dirname "$0")/lib.sh"

dir=$DBLOCK_SOURCE_DIR/completions
for tool in bash zsh fish; do
  command -v "$tool" >/dev/null || skip_or_fail "$tool is not installed (scripts/install-deps.sh)"
done
# The completions call `dblock` by name, as an installed one would be: lib.sh put it on PATH.
k=$(key compl)
assert_status "a key exists to be completed" 0 dblock run "$k" -- true

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
bash_complete() {  # bash_complete WORD...: COMPREPLY for completing the last word
  bash -c 'source /usr/share/bash-completion/bash_completion 2>/dev/null; source "$1"; shift
           COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
           _dblock dblock "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"; printf "%s\n" "${COMPREPLY[@]}"' \
    _ "$dir/dblock.bash" "$@"
}
check "bash: complete -p shows the function" \
  eval "bash -i -c 'source $dir/dblock.bash; complete -p dblock' 2>/dev/null | grep -q -- '-F _dblock'"
assert_eq "bash: dblock ru -> run" run "$(bash_complete dblock ru)"
assert_eq "bash: --strategy values" "advisory for-update lease txn-insert" "$(bash_complete dblock --strategy '' | sort | xargs)"
assert_eq "bash: --on-lost values" "ignore terminate" "$(bash_complete dblock run k --on-lost '' | sort | xargs)"
check "bash: run --ttl is completed" eval "bash_complete dblock run --tt | grep -qx -- --ttl"
check "bash: key names come from dblock status" eval "bash_complete dblock status '' | grep -qx -- '$k'"

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

# fish: complete -C prints the candidates.
fish_complete() { fish -N -c "source $dir/dblock.fish; complete -C '$1'" | cut -f1; }
check "fish: dblock ru -> run" eval 'fish_complete "dblock ru" | grep -qx run'
assert_eq "fish: --strategy values" "advisory for-update lease txn-insert" "$(fish_complete 'dblock --strategy ' | sort | xargs)"
assert_eq "fish: --on-lost values" "ignore terminate" "$(fish_complete 'dblock run k --on-lost ' | sort | xargs)"
check "fish: key names come from dblock status" eval 'fish_complete "dblock status " | grep -qxF -- "$k"'

finish
