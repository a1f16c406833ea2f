# zsh -f zsh_complete.zsh FPATH_DIR LINE: types LINE and a Tab into an interactive zsh whose
# completion system loaded the completions in FPATH_DIR, and prints what the terminal showed
# (escape sequences removed). Used by once_completions.sh: zsh completes only inside its line
# editor, so a pseudo-terminal (zsh/zpty) is the way to see real completions. After the Tab
# comes a key bound to a widget that shows a marker: zle handles keys in order, so once the
# marker is on the terminal the completion has been shown (a fixed sleep is too short on a
# loaded machine).
zmodload zsh/zpty || exit 2
zpty z 'zsh -f -i'
zpty -w z "PS1='> '; fpath=(${(q)1} \$fpath); autoload -U compinit; compinit -u -D; LISTMAX=1000"
zpty -w z "zc_mark() { zle -M zc-done-\${:-mark} }; zle -N zc_mark; bindkey '^Xm' zc_mark"
zpty -n -w z "$2"$'\t\030m'
local all='' chunk
integer deadline=$(( SECONDS + 20 ))
while (( SECONDS < deadline )) && [[ $all != *zc-done-mark* ]]; do
  zpty -r -t z chunk && all+=$chunk || sleep 0.1
done
zpty -d z
# Drop the terminal's escape sequences, carriage returns and the marker.
print -r -- "$all" | sed 's/\x1b\[[0-9;?]*[A-Za-z]//g; s/zc-done-mark//' | tr -d '\r'
