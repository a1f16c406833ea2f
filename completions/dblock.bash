# bash completion for dblock(1). Installed to /usr/share/bash-completion/completions/dblock.
# Key names come from `dblock status` (only when it answers within a second).

_dblock_keys() {  # _dblock_keys [GLOBAL OPTION...]: the keys of the database those options name, one a line
  local out
  out=$(timeout 1 dblock "$@" status --raw -n -o KEY 2>/dev/null) ||
    out=$(timeout 1 dblock "$@" status 2>/dev/null | awk 'NR > 1 { print $1 }')
  # --raw writes a space or another unsafe byte as \xHH, and so a backslash (\x5c): %b decodes
  # them (a key holds no control character, so no line is split).
  [ -n "$out" ] && printf '%b\n' "$out"
}

# _dblock_unquote WORD: the text WORD stands for on the shell's line (quotes and backslashes
# removed), so that the keys are matched against what was meant.
_dblock_unquote() {
  local w=$1 out="" c q=""
  while [ -n "$w" ]; do
    c=${w:0:1} w=${w:1}
    if [ -n "$q" ]; then
      if [ "$c" = "$q" ]; then q=""; elif [ "$q$c" = '"\' ] && [ -n "$w" ]; then out+=${w:0:1} w=${w:1}; else out+=$c; fi
    elif [ "$c" = "'" ] || [ "$c" = '"' ]; then q=$c
    elif [ "$c" = '\' ]; then out+=${w:0:1} w=${w:1}
    else out+=$c
    fi
  done
  printf '%s' "$out"
}

# -o's column names (dblock status --help and dblock history --help list them).
_dblock_status_columns="KEY SLOT STATE OWNER HOST PID TOKEN SINCE AGE EXPIRES-IN STRATEGY RENEWED RELEASED
  LAST-START LAST-FINISH LAST-EXIT"
_dblock_history_columns="STARTED KEY HOST PID OWNER TOKEN DURATION OUTCOME EXIT FINISHED STRATEGY ID"

_dblock() {
  local cur prev words cword
  # A DSN holds colons (sqlite:/path), which readline splits words at: keep it one word.
  _init_completion -n =: 2>/dev/null || {
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD - 1]}
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
  }

  local global_opts="-h --help --version -V --config -d --dsn --dsn-file -s --strategy --table-prefix
    --table-format --table --history-keep --connect-timeout -v --verbose -q --quiet --log --log-runs"
  local subcommands="run acquire renew release status history init schema doctor check metrics help"

  # The subcommand is the first word that is not an option or an option's value; the words
  # after it that are neither are its keys. The options that choose the database and its
  # tables (before or after the subcommand) are kept for `dblock status`, which lists the keys.
  local i w sub="" nkeys=0 after_dashes=0
  local -a db_opts=()
  for ((i = 1; i < cword; i++)); do
    w=${words[i]}
    case $w in
      --) if [ -n "$sub" ]; then after_dashes=1; break; fi ;;
      -d | --dsn | --dsn-file | --config | --table-prefix | --table-format | --table)
        db_opts+=("$w" "${words[i + 1]}")
        ((i++)) ;;
      -d?* | --dsn=* | --dsn-file=* | --config=* | --table-prefix=* | --table-format=* | --table=*)
        db_opts+=("$w") ;;
      -s | --strategy | --history-keep | --connect-timeout | --log | -E | --conflict-exit-code | --ttl | \
        --min-hold | --min-interval | --max-hold | --kill-after | --on-lost | --owner | -c | --command | \
        --overload-retry | --slots | --token | -o | --output | --limit | --max-age | --warn-age | --dialect)
        ((i++)) ;;
      # -w's duration is optional: it takes the next word only when that is one.
      -w | --wait) [[ ${words[i + 1]} == [0-9]* ]] && ((i++)) ;;
      -*) ;;
      *) if [ -z "$sub" ]; then sub=$w; else ((nkeys++)); fi ;;
    esac
  done
  # After `--` comes the command: complete it as a command line of its own.
  if ((after_dashes)); then
    local j  # _command_offset counts readline's words, which split a DSN at its colons
    for ((j = 1; j < COMP_CWORD; j++)); do [ "${COMP_WORDS[j]}" = -- ] && break; done
    _command_offset $((j + 1)) 2>/dev/null || COMPREPLY=($(compgen -c -- "$cur"))
    return
  fi

  case $prev in
    -s | --strategy) COMPREPLY=($(compgen -W "lease advisory for-update txn-insert" -- "$cur")); return ;;
    --on-lost) COMPREPLY=($(compgen -W "terminate ignore" -- "$cur")); return ;;
    --dialect) COMPREPLY=($(compgen -W "sqlite mysql postgres" -- "$cur")); return ;;
    --log) COMPREPLY=($(compgen -W "stderr syslog journal" -- "$cur")); return ;;
    --table-format) COMPREPLY=($(compgen -W "dblock shedlock" -- "$cur")); return ;;
    --config | --dsn-file) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    -d | --dsn)
      if [[ $cur == sqlite:* ]]; then
        COMPREPLY=($(compgen -P sqlite: -f -- "${cur#sqlite:}"))
      else
        COMPREPLY=($(compgen -W "sqlite: mysql:// postgres://" -- "$cur"))
      fi
      compopt -o nospace 2>/dev/null
      __ltrim_colon_completions "$cur" 2>/dev/null
      return ;;
    --output) [ "$sub" = metrics ] && { COMPREPLY=($(compgen -f -- "$cur")); return; } ;&
    -o)
      local columns=$_dblock_status_columns prefix=""
      [ "$sub" = history ] && columns=$_dblock_history_columns
      [[ $cur == *,* ]] && prefix=${cur%,*},
      COMPREPLY=($(compgen -P "$prefix" -W "$columns" -- "${cur##*,}"))
      compopt -o nospace 2>/dev/null
      return ;;
    --ttl | --min-hold | --min-interval | --max-hold | --kill-after | --connect-timeout | -w | --wait | --overload-retry | \
      --max-age | --warn-age | --owner | --token | --limit | --history-keep | --table-prefix | --table | \
      -E | --conflict-exit-code | --slots | -c | --command)
      return ;;
  esac

  local opts
  case $sub in
    "")
      if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$global_opts" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "$subcommands" -- "$cur"))
      fi
      return ;;
    run) opts="-h --help -n --nonblock -w --wait -E --conflict-exit-code --ttl --min-hold --min-interval
      --max-hold --kill-after --on-lost --owner --no-history -c --command --slots --overload-retry" ;;
    acquire) opts="-h --help --ttl --owner -w --wait -E --conflict-exit-code --slots --overload-retry" ;;
    renew) opts="-h --help --ttl --owner --token" ;;
    release) opts="-h --help --owner --token --force" ;;
    status) opts="-h --help -J --json -o --output --raw -n --noheadings" ;;
    history) opts="-h --help --limit -J --json -o --output --raw -n --noheadings" ;;
    check) opts="-h --help --max-age --warn-age" ;;
    metrics) opts="-h --help --output" ;;
    schema) opts="-h --help --dialect --statements" ;;
    init | doctor) opts="-h --help" ;;
    help) COMPREPLY=($(compgen -W "$subcommands" -- "$cur")); return ;;
    *) return ;;
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    return
  fi
  # The KEY argument: one for most subcommands, any number for status and metrics.
  case $sub in
    run | acquire | renew | release | history | check) ((nkeys == 0)) || return ;;
    status | metrics) ;;
    *) return ;;
  esac
  # Each key as a word of the line: escaped (nightly\ report), or as it is within the quote the
  # word opens ("nightly report), which readline then closes.
  local key want quoted
  want=$(_dblock_unquote "$cur")
  while IFS= read -r key; do
    [[ -n $key && $key == "$want"* ]] || continue
    if [[ $cur == [\'\"]* ]]; then quoted=$key; else printf -v quoted %q "$key"; fi
    COMPREPLY+=("$quoted")
  done < <(_dblock_keys "${db_opts[@]}")
  __ltrim_colon_completions "$cur" 2>/dev/null
}
complete -F _dblock dblock
