"""Side by side with `orchestrate analyze` (make bench-analysis): the paper's estimator as one
DuckDB query over the same Parquet files (pairing, first-after-gap exclusion, per-probe medians
over runs, null offsets, pooled medians), and the floor of any reader: pyarrow decoding the three
columns the estimator needs. Prints wall seconds of each.

usage: bench_duckdb.py RESULTS TSC_HZ
"""
import sys
import time

import duckdb
import pyarrow.dataset as ds

results, tsc_hz = sys.argv[1], float(sys.argv[2])
ns = 1e9 / tsc_hz
files = f"{results}/data/**/*.parquet"
QUERY = f"""
WITH records AS (
  SELECT program, session, run, probe_id, port, tsc
  FROM read_parquet('{files}', hive_partitioning = true)
), firsts AS (
  SELECT program, session, run, probe_id, port, min(tsc) AS tsc FROM records GROUP BY ALL
), gap AS (
  SELECT program, session, run, arg_min(probe_id, tsc) AS probe_id FROM records GROUP BY ALL
), d AS (
  SELECT p.program, p.session, p.run, p.probe_id, (p.tsc::BIGINT - b.tsc::BIGINT)::DOUBLE * {ns} AS d
  FROM firsts p JOIN firsts b USING (program, session, run, probe_id)
  WHERE p.port = 0 AND b.port = 1
    AND NOT EXISTS (SELECT 1 FROM gap g WHERE g.program = p.program AND g.session = p.session
                    AND g.run = p.run AND g.probe_id = p.probe_id)
), estimates AS (
  SELECT program, session, probe_id, quantile_cont(d, 0.5) AS estimate FROM d GROUP BY ALL
)
SELECT program, quantile_cont(estimate, [0.05, 0.5, 0.99]) FROM estimates GROUP BY program ORDER BY program
"""
t = time.perf_counter()
duckdb.sql(QUERY).fetchall()
query_s = time.perf_counter() - t
t = time.perf_counter()
ds.dataset(f"{results}/data", format="parquet", partitioning="hive").to_table(columns=["probe_id", "port", "tsc"])
decode_s = time.perf_counter() - t
print(f"duckdb-query {query_s:.2f} pyarrow-decode {decode_s:.2f}")
