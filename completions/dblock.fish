# fish completion for dblock(1). Installed to /usr/share/fish/vendor_completions.d/dblock.fish.

set -l subcommands run acquire renew release status history init schema doctor check metrics help

function __dblock_keys
    set -l keys (timeout 1 dblock status --raw -n -o KEY 2>/dev/null)
    or set keys (timeout 1 dblock status 2>/dev/null | awk 'NR > 1 { print $1 }')
    printf '%s\n' $keys
end

# Global options and subcommands (before the subcommand).
complete -c dblock -f
for pair in 'run:Run a command while holding the lock' 'acquire:Take a lease, print its token' \
        'renew:Extend a lease' 'release:Release a lease' 'status:Who holds which lock' \
        'history:Recent runs' 'init:Create the tables' 'schema:Print the DDL' 'doctor:Check the set-up' \
        'check:Monitoring check of a key' 'metrics:Prometheus metrics' 'help:Help on a subcommand'
    set -l parts (string split -m 1 : -- $pair)
    complete -c dblock -n "not __fish_seen_subcommand_from $subcommands" -a $parts[1] -d $parts[2]
end

complete -c dblock -s h -l help -d 'Print help'
complete -c dblock -s V -l version -d 'Print the version'
complete -c dblock -l config -r -F -d 'Config file'
complete -c dblock -s d -l dsn -x -a 'sqlite: mysql:// postgres://' -d 'Database'
complete -c dblock -l dsn-file -r -F -d 'Read the DSN from this file'
complete -c dblock -s s -l strategy -x -a 'lease advisory for-update txn-insert' -d 'Locking strategy'
complete -c dblock -l table-prefix -x -d 'Table name prefix'
complete -c dblock -l table-format -x -a 'dblock shedlock' -d 'Lock table format'
complete -c dblock -l table -x -d 'The ShedLock table'
complete -c dblock -l history-keep -x -d 'Runs kept per key'
complete -c dblock -l connect-timeout -x -d 'Give up connecting after'
complete -c dblock -s v -l verbose -d 'Explain every decision'
complete -c dblock -s q -l quiet -d 'Print nothing but errors'
complete -c dblock -l log -x -a 'stderr syslog journal' -d 'Where log lines go'
complete -c dblock -l log-runs -d 'Log start and end of every run'

# run
set -l r "__fish_seen_subcommand_from run"
complete -c dblock -n $r -s n -l nonblock -d 'Do not wait'
complete -c dblock -n $r -s w -l wait -x -d 'Wait up to D'
complete -c dblock -n $r -s E -l conflict-exit-code -x -d 'Exit status when busy'
complete -c dblock -n $r -l ttl -x -d 'Lease length'
complete -c dblock -n $r -l min-hold -x -d 'Keep the lock at least D'
complete -c dblock -n $r -l min-interval -x -d 'Minimum time between starts'
complete -c dblock -n $r -l max-hold -x -d 'Terminate the command after D'
complete -c dblock -n $r -l kill-after -x -d 'Grace between SIGTERM and SIGKILL'
complete -c dblock -n $r -l on-lost -x -a 'terminate ignore' -d 'When the lock is lost'
complete -c dblock -n $r -l owner -x -d 'Holder identity'
complete -c dblock -n $r -l no-history -d 'Do not record the run'
complete -c dblock -n $r -s c -l command -x -d 'Command line for sh -c'
# acquire, renew, release
complete -c dblock -n "__fish_seen_subcommand_from acquire renew" -l ttl -x -d 'Lease length'
complete -c dblock -n "__fish_seen_subcommand_from acquire renew release" -l owner -x -d 'Holder identity'
complete -c dblock -n "__fish_seen_subcommand_from acquire" -s w -l wait -x -d 'Wait up to D'
complete -c dblock -n "__fish_seen_subcommand_from acquire" -s E -l conflict-exit-code -x -d 'Exit status when busy'
complete -c dblock -n "__fish_seen_subcommand_from run acquire" -l slots -x -d 'A semaphore of N holders'
complete -c dblock -n "__fish_seen_subcommand_from renew release" -l token -x -d 'Fencing token'
complete -c dblock -n "__fish_seen_subcommand_from release" -l force -d 'Release whoever holds it'
# status, history
complete -c dblock -n "__fish_seen_subcommand_from status history" -s J -l json -d 'One JSON document'
complete -c dblock -n "__fish_seen_subcommand_from status history" -s o -l output -x -d 'Columns'
complete -c dblock -n "__fish_seen_subcommand_from status history" -l raw -d 'Raw output'
complete -c dblock -n "__fish_seen_subcommand_from status history" -s n -l noheadings -d 'No header line'
complete -c dblock -n "__fish_seen_subcommand_from history" -l limit -x -d 'Runs to show'
# check, schema, help
complete -c dblock -n "__fish_seen_subcommand_from check" -l max-age -x -d 'Critical age'
complete -c dblock -n "__fish_seen_subcommand_from check" -l warn-age -x -d 'Warning age'
complete -c dblock -n "__fish_seen_subcommand_from schema" -l dialect -x -a 'sqlite mysql postgres' -d 'SQL dialect'
complete -c dblock -n "__fish_seen_subcommand_from help" -x -a "$subcommands"
# Key names for the subcommands that take one.
complete -c dblock -n "__fish_seen_subcommand_from run acquire renew release status history check metrics" -x -a '(__dblock_keys)'
