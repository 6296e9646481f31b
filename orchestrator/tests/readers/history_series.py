"""The history's headline series read by DuckDB and by Spark, straight from the store's
hive-partitioned Parquet (the queries of docs/history.md), with no code of ours. Prints one JSON object:
per reader, per "program statistic", the nightly values in time order and their median; and per
reader the number of per-probe estimates of studies that are in the history.

usage: history_series.py STORE [duckdb|spark ...]

A study is in the history when its rows exist: estimates are counted only for those studies.
"""
import json
import sys

STORE = sys.argv[1]
READERS = sys.argv[2:] or ["duckdb", "spark"]

SERIES = """
SELECT program, {stat} AS value FROM rows
WHERE mode = 'headline' AND level IS NULL
ORDER BY time, study
"""
MEDIAN = "SELECT program, median({stat}) FROM rows WHERE mode = 'headline' GROUP BY program"
ESTIMATES = "SELECT count(*) FROM estimates e WHERE e.study IN (SELECT study FROM rows)"


def collect(sql):
    out = {}
    for stat in ("p50_ns", "p99_ns"):
        name = stat[:-3]
        for program, value in sql(SERIES.format(stat=stat)):
            out.setdefault(f"{program} {name}", {"values": [], "median": None})["values"].append(value)
        for program, median in sql(MEDIAN.format(stat=stat)):
            out[f"{program} {name}"]["median"] = median
    return {"series": out, "estimates": sql(ESTIMATES)[0][0]}


def duckdb_reader():
    import duckdb

    con = duckdb.connect()
    for table in ("rows", "estimates"):
        con.sql(
            f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{STORE}/{table}/*/*/*.parquet', hive_partitioning = true)"
        )
    return collect(lambda q: con.sql(q).fetchall())


def spark_reader():
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    for table in ("rows", "estimates"):
        spark.read.parquet(f"{STORE}/{table}").createOrReplaceTempView(table)
    # Spark's median is exact (percentile at 0.5, interpolated), as DuckDB's.
    result = collect(lambda q: [tuple(r) for r in spark.sql(q).collect()])
    spark.stop()
    return result


print(json.dumps({r: {"duckdb": duckdb_reader, "spark": spark_reader}[r]() for r in READERS}))
