"""The paper's estimator over a results folder, computed three ways by tools other than ours:
DuckDB (the hive-partitioned query of docs/results.md), a pyarrow dataset and pandas. Prints, per reader,
the calibrated median of every (program, sessions, null group) named on the command line.

usage: paper_medians.py RESULTS TSC_HZ PROGRAM:S1,S2,...:NULL_GROUP [...]

Per run: the first copy of each probe on each port, D = tsc_P - tsc_B in ns (subtracted as
integers: TSC values beyond 2^53 lose ticks as doubles), the probe of the
run's earliest record left out (first after the idle gap); per session: each probe's median over
runs; the null offset: the median of the null group's per-probe estimates; a program's median:
that of its sessions' per-probe estimates, less the null offset (linear interpolation between
order statistics throughout, numpy's and DuckDB's quantile_cont).
"""
import glob
import json
import re
import sys

import duckdb
import pandas as pd
import pyarrow.dataset as ds


def estimates_query(results, ns):
    """The per-probe estimates (program, session, probe_id, estimate) as one DuckDB query."""
    files = f"{results}/data/**/*.parquet"
    return f"""
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
)
SELECT program, session, probe_id, quantile_cont(d, 0.5) AS estimate FROM d GROUP BY ALL
"""


def medians(estimates, groups):
    """estimates: DataFrame program, session, probe_id, estimate."""
    out = {}
    for program, sessions, null_group in groups:
        delta = estimates[estimates.program == null_group].estimate.median()
        e = estimates[(estimates.program == program) & estimates.session.isin(sessions)].estimate
        out[f"{program}:{','.join(map(str, sessions))}"] = float(e.median() - delta)
    return out


def duckdb_estimates(results, ns):
    return duckdb.sql(estimates_query(results, ns)).df()


def pyarrow_estimates(results, ns):
    table = ds.dataset(f"{results}/data", format="parquet", partitioning="hive").to_table(
        columns=["program", "session", "run", "probe_id", "port", "tsc"]
    )
    return from_records(table.to_pandas(), ns)


def pandas_estimates(results, ns):
    frames = []
    for path in glob.glob(f"{results}/data/program=*/session=*/*.parquet"):
        m = re.search(r"program=([^/]+)/session=(\d+)/", path)
        f = pd.read_parquet(path, columns=["run", "probe_id", "port", "tsc"])
        f["program"], f["session"] = m.group(1), int(m.group(2))
        frames.append(f)
    return from_records(pd.concat(frames), ns)


def from_records(r, ns):
    r = r.astype({"program": str, "session": int, "run": int})
    keys = ["program", "session", "run"]
    first = r.groupby(keys + ["probe_id", "port"], as_index=False).tsc.min()
    gap = r.loc[r.groupby(keys).tsc.idxmin(), keys + ["probe_id"]]
    p, b = first[first.port == 0], first[first.port == 1]
    d = p.merge(b, on=keys + ["probe_id"], suffixes=("_p", "_b"))
    d = d.merge(gap, on=keys + ["probe_id"], how="left", indicator=True)
    d = d[d._merge == "left_only"]
    d["d"] = (d.tsc_p.astype("int64") - d.tsc_b.astype("int64")).astype("float64") * ns
    return d.groupby(["program", "session", "probe_id"], as_index=False).d.median().rename(columns={"d": "estimate"})


if __name__ == "__main__":
    results, tsc_hz = sys.argv[1], float(sys.argv[2])
    groups = [(p, [int(x) for x in s.split(",")], n) for p, s, n in (a.split(":") for a in sys.argv[3:])]
    ns = 1e9 / tsc_hz
    print(json.dumps({
        "duckdb": medians(duckdb_estimates(results, ns), groups),
        "pyarrow": medians(pyarrow_estimates(results, ns), groups),
        "pandas": medians(pandas_estimates(results, ns), groups),
    }))
