# fish completion for dblock(1). Installed to /usr/share/fish/vendor_completions.d/dblock.fish.

set -l subcommands run acquire renew release status history init schema doctor check metrics help

# The options on the line that choose the database and its tables (before or after the
# subcommand), for `dblock status`.
function __dblock_db_opts
    set -l words (commandline -opc)
    set -l i 2
    while test $i -le (count $words)
        switch $words[$i]
            case -d --dsn --dsn-file --config --table-prefix --table-format --table
                set i (math $i + 1)
                test $i -le (count $words); and printf '%s\n' $words[(math $i - 1)] $words[$i]
            case '-d*' '--dsn=*' '--dsn-file=*' '--config=*' '--table-prefix=*' '--table-format=*' '--table=*'
                printf '%s\n' $words[$i]
        end
        set i (math $i + 1)
    end
end

# The keys of the database those options name.
function __dblock_keys
    set -l opts (__dblock_db_opts)
    set -l keys (timeout 1 dblock $opts status --raw -n -o KEY 2>/dev/null)
    or set keys (timeout 1 dblock $opts status 2>/dev/null | awk 'NR > 1 { print $1 }')
    # --raw writes a space or another unsafe byte as \xHH, and so a backslash (\x5c): decode them;
    # fish escapes each candidate for the line itself (nightly\ report).
    test (count $keys) -gt 0; and printf '%b\n' $keys
end

# Whether the word being completed is a KEY: status and metrics take any number, run, acquire,
# renew, release, history and check one; nothing after `--` is.
function __dblock_wants_key
    set -l words (commandline -opc)
    set -l sub
    set -l keys 0
    set -l i 2
    while test $i -le (count $words)
        set -l w $words[$i]
        switch $w
            case '--'
                test -n "$sub"; and return 1
            case -d --dsn --dsn-file --config --table-prefix --table-format --table -s --strategy --history-keep \
                    --connect-timeout --log -E --conflict-exit-code --ttl --min-hold --min-interval --max-hold \
                    --kill-after --on-lost --owner -c --command --slots --overload-retry --token -o --output --limit --max-age \
                    --warn-age --dialect
                set i (math $i + 1)
            case -w --wait
                # Its duration is optional: it takes the next word only when that is one.
                string match -qr '^[0-9]' -- "$words[(math $i + 1)]"; and set i (math $i + 1)
            case '-*'
            case '*'
                if test -z "$sub"
                    set sub $w
                else
                    set keys (math $keys + 1)
                end
        end
        set i (math $i + 1)
    end
    contains -- "$sub" status metrics; and return 0
    contains -- "$sub" run acquire renew release history check; and test $keys -eq 0
end

function __dblock_status_columns
    printf '%s\n' KEY SLOT STATE OWNER HOST PID TOKEN SINCE AGE EXPIRES-IN STRATEGY RENEWED RELEASED \
        LAST-START LAST-FINISH LAST-EXIT
end

function __dblock_history_columns
    printf '%s\n' STARTED KEY HOST PID OWNER TOKEN DURATION OUTCOME EXIT FINISHED STRATEGY ID
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
complete -c dblock -n "__fish_seen_subcommand_from run acquire" -l overload-retry -x -d 'Retry a server that turns connections away for D'
complete -c dblock -n "__fish_seen_subcommand_from renew release" -l token -x -d 'Fencing token'
complete -c dblock -n "__fish_seen_subcommand_from release" -l force -d 'Release whoever holds it'
# status, history
complete -c dblock -n "__fish_seen_subcommand_from status history" -s J -l json -d 'One JSON document'
complete -c dblock -n "__fish_seen_subcommand_from status" -s o -l output -x \
    -a '(__fish_complete_list , __dblock_status_columns)' -d 'Columns'
complete -c dblock -n "__fish_seen_subcommand_from history" -s o -l output -x \
    -a '(__fish_complete_list , __dblock_history_columns)' -d 'Columns'
complete -c dblock -n "__fish_seen_subcommand_from status history" -l raw -d 'Raw output'
complete -c dblock -n "__fish_seen_subcommand_from status history" -s n -l noheadings -d 'No header line'
complete -c dblock -n "__fish_seen_subcommand_from history" -l limit -x -d 'Runs to show'
complete -c dblock -n "__fish_seen_subcommand_from metrics" -l output -r -F -d 'Write to FILE, atomically'
# check, schema, help
complete -c dblock -n "__fish_seen_subcommand_from check" -l max-age -x -d 'Critical age'
complete -c dblock -n "__fish_seen_subcommand_from check" -l warn-age -x -d 'Warning age'
complete -c dblock -n "__fish_seen_subcommand_from schema" -l dialect -x -a 'sqlite mysql postgres' -d 'SQL dialect'
complete -c dblock -n "__fish_seen_subcommand_from schema" -l statements -d 'Every statement dblock can run, for a DBA'
complete -c dblock -n "__fish_seen_subcommand_from help" -x -a "$subcommands"
# Key names, where a key goes.
complete -c dblock -n __dblock_wants_key -x -a '(__dblock_keys)'
