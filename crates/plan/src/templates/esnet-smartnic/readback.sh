# What the card runs, as JSON, from `sn-cfg show device info`: the build timestamp (`Build:
# Status`), the build pipeline number (`Build: Number`, USR_ACCESS) and the board (`Card: Profile`).
{{ sn_cfg }} show device info | awk -F': *' '/^ *Status:/ { b = $2 } /^ *Number:/ { u = $2 } /^ *Profile:/ { p = $2 } END { if (b == "") exit 1; printf "{\"build_timestamp\":\"%s\",\"usr_access\":\"%s\",\"profile\":\"%s\"}\n", b, u, p }'
