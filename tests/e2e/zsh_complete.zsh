# zsh -f zsh_complete.zsh FPATH_DIR LINE: types LINE and a Tab into an interactive zsh whose
# completion system loaded the completions in FPATH_DIR, and prints what the terminal showed
# (escape sequences removed). Used by once_completions.sh: zsh completes only inside its line
# editor, so a pseudo-terminal (zsh/zpty) is the way to see real completions.
zmodload zsh/zpty || exit 2
zpty z 'zsh -f -i'
zpty -w z "PS1='> '; fpath=(${(q)1} \$fpath); autoload -U compinit; compinit -u -D; LISTMAX=1000"
zpty -n -w z "$2"$'\t'
sleep 1.5
local all='' chunk
while zpty -r -t z chunk; do all+=$chunk; done
zpty -d z
# Drop the terminal's escape sequences and carriage returns.
print -r -- "$all" | sed 's/\x1b\[[0-9;?]*[A-Za-z]//g' | tr -d '\r'
