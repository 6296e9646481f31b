# Tables cleared, then the entries file applied (`sn-p4 apply p4bm`: `table_add T A KEY => PARAMS`
# lines, the syntax of the programs' .tbl files).
{{ sn_p4 }} clear table && {{ sn_p4 }} apply p4bm {{ table }}
