#!/usr/bin/env bash
# Shell completion in a real terminal (tmux): bash (with bash-completion), zsh and fish, each
# with dblock's file from completions/, are typed `dblock status nigh` and a Tab. The key
# `nightly report` must appear on the line escaped as that shell writes it (`nightly\ report`),
# and the line, run, must name that key: status prints it (as --raw writes a space, \x20) with
# its state. So must a key with quotes and a dollar sign, and (bash) a key completed within a
# quote. once_completions.sh checks the rest of the completions without a terminal.
source "$(dirname "$0")/lib.sh"

for tool in tmux bash zsh fish; do
  command -v "$tool" >/dev/null || skip_or_fail "$tool is not installed (scripts/install-deps.sh)"
done
[ -r /usr/share/bash-completion/bash_completion ] || skip_or_fail "bash-completion is not installed (scripts/install-deps.sh)"
dir=$DBLOCK_SOURCE_DIR/completions
bin_dir=$(dirname "$(readlink -f "$DBLOCK_BIN")")

assert_status "a key with a space is held" 0 dblock acquire "nightly report" --ttl 5m
key2="weekly 'db' \$dump"
assert_status "a key with quotes and a dollar sign is held" 0 dblock acquire "$key2" --ttl 5m
raw2="weekly\\\\x20'db'\\\\x20\$dump held"  # a grep pattern: status --raw's line for it

# tmux of this test's own (its own socket; killed at the end).
tmux_socket=dblock-e2e-$$
tmux() { command tmux -L "$tmux_socket" -f /dev/null "$@"; }
trap 'tmux kill-server 2>/dev/null; e2e_cleanup' EXIT
# A session that stays: killing the last session makes the server exit, and a new-session sent
# while it exits fails ("server exited unexpectedly"), as it did once on a loaded machine.
tmux new-session -d -s keep -x 20 -y 5 sleep 600

# line: the pane's last line that is not empty (the line being edited).
line() { tmux capture-pane -p -t t | sed 's/[[:space:]]*$//' | grep -v '^$' | tail -n 1; }
# type_in SHELL_COMMAND PROMPT TEXT: starts SHELL_COMMAND in a fresh 200x40 terminal, waits for
# PROMPT, types TEXT and a Tab, waits for the line to change and prints it. The shell stays.
type_in() {
  local prompt=$2 text=$3 before
  tmux kill-session -t t 2>/dev/null
  tmux new-session -d -s t -x 200 -y 40 \
    env -i PATH="$bin_dir:/usr/bin:/bin" HOME="$E2E_TMP" TERM=xterm DBLOCK_DSN="$DBLOCK_DSN" \
    DBLOCK_TABLE_PREFIX="$DBLOCK_TABLE_PREFIX" $1
  wait_for 10 eval '[ "$(line)" = "${prompt% }" ]' || { echo "no prompt: $(line)" >&2; return; }
  tmux send-keys -t t -l "$text"
  wait_for 10 eval '[ "$(line)" = "$prompt$text" ]'
  before=$(line)
  tmux send-keys -t t Tab
  wait_for 10 eval '[ "$(line)" != "$before" ]'
  sleep 0.2  # a shell may redraw the line once more
  line
}
# run_line: adds options that print the key and state, runs the line, prints what it printed:
# the line that answers, not a place on the screen (the shell's next prompt may not be drawn
# yet, as once on a loaded machine, when the line above the output is the command).
run_line() {
  local answer=' held$\| free$\|rror\|nvalid'
  tmux send-keys -t t -l ' --raw -n -o KEY,STATE'
  tmux send-keys -t t Enter
  wait_for 10 eval 'tmux capture-pane -p -t t | grep -q "$answer"'
  tmux capture-pane -p -t t | grep -v '^$' | grep -v -- '--raw -n -o KEY,STATE' | grep "$answer" | tail -n 1
}
# each_shell NAME COMMAND PROMPT: the checks, in that shell.
each_shell() {
  local name=$1 command=$2 prompt=$3 got
  assert_eq "$name: the key completes escaped" "${prompt}dblock status nightly\\ report" \
    "$(type_in "$command" "$prompt" 'dblock status nigh')"
  assert_eq "$name: and the line names it" 'nightly\x20report held' "$(run_line)"
  got=$(type_in "$command" "$prompt" 'dblock status week')
  echo "    | $name: $got"
  check "$name: quotes and a dollar sign: the line names the key" grep -qx "$raw2" <<<"$(run_line)"
}

cat >"$E2E_TMP/bashrc" <<EOF
PS1='$ '
source /usr/share/bash-completion/bash_completion
source $dir/dblock.bash
EOF
each_shell bash "bash --noprofile --rcfile $E2E_TMP/bashrc -i" '$ '
# Within a quote the word opens, the key goes in as it is, and readline closes the quote.
assert_eq "bash: in a quote, the key as it is" '$ dblock status "nightly report"' \
  "$(type_in "bash --noprofile --rcfile $E2E_TMP/bashrc -i" '$ ' 'dblock status "nigh')"
assert_eq "bash: and the line names it" 'nightly\x20report held' "$(run_line)"

cat >"$E2E_TMP/.zshrc" <<EOF
PS1='> '
fpath=($dir \$fpath)
autoload -U compinit
compinit -u -D
EOF
each_shell zsh "env ZDOTDIR=$E2E_TMP zsh -i" '> '

mkdir -p "$E2E_TMP/fish"
cat >"$E2E_TMP/fish/config.fish" <<EOF
function fish_prompt; echo -n '> '; end
function fish_greeting; end
source $dir/dblock.fish
EOF
each_shell fish "env XDG_CONFIG_HOME=$E2E_TMP fish -i" '> '
finish
