# bash completion for dblock(1). Installed to /usr/share/bash-completion/completions/dblock.
# Key names come from `dblock status` (only when it answers within a second).

_dblock_keys() {
  local out
  out=$(timeout 1 dblock status --raw -n -o KEY 2>/dev/null) ||
    out=$(timeout 1 dblock status 2>/dev/null | awk 'NR > 1 { print $1 }')
  printf '%s\n' "$out"
}

_dblock() {
  local cur prev words cword
  _init_completion -n = 2>/dev/null || {
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD - 1]}
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
  }

  local global_opts="-h --help --version -V --config -d --dsn --dsn-file -s --strategy --table-prefix
    --table-format --table --history-keep --connect-timeout -v --verbose -q --quiet --log --log-runs"
  local subcommands="run acquire renew release status history init schema doctor check metrics help"

  # The subcommand is the first word that is not an option or an option's value.
  local i sub="" after_dashes=0
  for ((i = 1; i < cword; i++)); do
    case ${words[i]} in
      --) [ -n "$sub" ] && after_dashes=1 ;;
      -d | --dsn | --dsn-file | -s | --strategy | --table-prefix | --table-format | --table | --history-keep | \
        --connect-timeout | --config | --log)
        [ -z "$sub" ] && ((i++)) ;;
      -*) ;;
      *) [ -z "$sub" ] && sub=${words[i]} ;;
    esac
  done
  # After `--` comes the command: complete it as a command line of its own.
  if ((after_dashes)); then
    local j
    for ((j = 1; j < cword; j++)); do [ "${words[j]}" = -- ] && break; done
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
    -d | --dsn) COMPREPLY=($(compgen -W "sqlite: mysql:// postgres://" -- "$cur")); return ;;
    --ttl | --min-hold | --min-interval | --max-hold | --kill-after | --connect-timeout | -w | --wait | \
      --max-age | --warn-age | --owner | --token | --limit | --history-keep | --table-prefix | --table | \
      -E | --conflict-exit-code | -o | --output | --slots)
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
      --max-hold --kill-after --on-lost --owner --no-history -c --command --slots" ;;
    acquire) opts="-h --help --ttl --owner -w --wait -E --conflict-exit-code --slots" ;;
    renew) opts="-h --help --ttl --owner --token" ;;
    release) opts="-h --help --owner --token --force" ;;
    status) opts="-h --help -J --json -o --output --raw -n --noheadings" ;;
    history) opts="-h --help --limit -J --json -o --output --raw -n --noheadings" ;;
    check) opts="-h --help --max-age --warn-age" ;;
    metrics) opts="-h --help" ;;
    schema) opts="-h --help --dialect" ;;
    init | doctor) opts="-h --help" ;;
    help) COMPREPLY=($(compgen -W "$subcommands" -- "$cur")); return ;;
    *) return ;;
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    return
  fi
  # The KEY argument of the subcommands that take one.
  case $sub in
    run | acquire | renew | release | status | history | check | metrics)
      COMPREPLY=($(compgen -W "$(_dblock_keys)" -- "$cur")) ;;
  esac
}
complete -F _dblock dblock
