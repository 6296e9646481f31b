# Every port the board has reports `Link: up` (`sn-cfg show port status`, one block per port).
s=$({{ sn_cfg }} show port status) && n=$(printf '%s\n' "$s" | grep -c 'Link: up'); [ "$n" -ge {{ cmacs }} ] || { printf '%s\n' "$s" >&2; echo "$n port(s) up" >&2; exit 1; }
