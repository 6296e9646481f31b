"""Side by side with `orchestrate analyze` (make bench-analysis): the paper's estimator as one
DuckDB query over the same Parquet files (pairing, first-after-gap exclusion, per-probe medians
over runs, pooled quantiles), and the floor of any reader: pyarrow decoding the three
columns the estimator needs (the best of three). Prints wall seconds of each.

usage: bench_duckdb.py RESULTS TSC_HZ
"""
import os
import sys
import time

import duckdb
import pyarrow.dataset as ds

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paper_medians import estimates_query  # noqa: E402

results, tsc_hz = sys.argv[1], float(sys.argv[2])
QUERY = f"""
WITH estimates AS ({estimates_query(results, 1e9 / tsc_hz)})
SELECT program, quantile_cont(estimate, [0.05, 0.5, 0.99]) FROM estimates GROUP BY program ORDER BY program
"""
t = time.perf_counter()
duckdb.sql(QUERY).fetchall()
query_s = time.perf_counter() - t
# The floor: the best of three decodes, as the fastest a reader gets once the files are cached.
decode_s = float("inf")
for _ in range(3):
    t = time.perf_counter()
    ds.dataset(f"{results}/data", format="parquet", partitioning="hive").to_table(columns=["probe_id", "port", "tsc"])
    decode_s = min(decode_s, time.perf_counter() - t)
print(f"duckdb-query {query_s:.2f} pyarrow-decode {decode_s:.2f}")
