# The lease of a testbed host: a file naming the orchestrator that holds it, whose mtime is the
# holder's heartbeat. Run as `sh -c <this script> lease OP LEASE OWNER [STALE_S]`: every value is
# an argument, none is part of the script.
#   take       create LEASE holding OWNER unless it exists (atomically, noclobber); an existing
#              lease whose heartbeat is more than STALE_S seconds old is taken over. Prints
#              `taken`, `stale <age> <new holder>` or `held <holder>`.
#   overwrite  make OWNER the holder, whoever held the lease.
#   heartbeat  renew the heartbeat.
#   release    remove LEASE if OWNER holds it.
op=$1 lease=$2 owner=$3
case $op in
take)
    mkdir -p -- "$(dirname -- "$lease")" || exit 1
    if (set -C; printf '%s\n' "$owner" > "$lease") 2>/dev/null; then
        echo taken
    else
        age=$(( $(date +%s) - $(stat -c %Y -- "$lease") ))
        if [ "$age" -gt "$4" ]; then
            printf '%s\n' "$owner" > "$lease"
            echo "stale $age $(cat -- "$lease")"
        else
            echo "held $(cat -- "$lease")"
        fi
    fi ;;
overwrite) printf '%s\n' "$owner" > "$lease" ;;
heartbeat) touch -- "$lease" ;;
release) grep -qF -e "$owner" -- "$lease" 2>/dev/null && rm -f -- "$lease"; true ;;
*) echo "lease: unknown operation $op" >&2; exit 2 ;;
esac
