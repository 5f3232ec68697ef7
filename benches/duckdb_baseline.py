"""DuckDB baseline for the query benchmark (benches/query.rs).

Reads the messages and collective operations the benchmark exported as CSV, converts them to
Parquet, then times the same four queries mtfdb runs, on the Parquet files, best of N runs.
Prints one line of JSON: {"selective": ms, "fan_in": ms, "matrix": ms, "full_scan": ms,
"rows": {...}} so that the benchmark can also check both engines agree on the row counts.

Needs the `duckdb` Python package: pip install duckdb
"""
import json
import sys
import time

try:
    import duckdb
except ImportError:
    print(json.dumps({"error": "the duckdb Python package is missing: pip install duckdb"}))
    sys.exit(0)

folder, a, b, t1, t2, size, runs = sys.argv[1], *map(int, sys.argv[2:8])
con = duckdb.connect()
con.execute(f"COPY (SELECT * FROM read_csv_auto('{folder}/messages.csv')) TO '{folder}/messages.parquet' (FORMAT parquet)")
con.execute(f"COPY (SELECT * FROM read_csv_auto('{folder}/collectives.csv')) TO '{folder}/collectives.parquet' (FORMAT parquet)")
m = f"'{folder}/messages.parquet'"
c = f"'{folder}/collectives.parquet'"

queries = {
    "selective": f"""SELECT * FROM {m}
        WHERE ((sender = {a} AND receiver = {b}) OR (sender = {b} AND receiver = {a}))
          AND send_time <= {t2} AND greatest(recv_time, send_time) >= {t1} AND size > {size}""",
    "fan_in": f"""WITH p AS (SELECT receiver AS rank, sum(size) AS bytes, count(*) AS messages,
                         count(DISTINCT sender) AS senders FROM {m} GROUP BY receiver),
                   k AS (SELECT rank, sum(recv_bytes) AS bytes FROM {c} GROUP BY rank)
        SELECT coalesce(p.rank, k.rank) AS rank, coalesce(p.bytes, 0) + coalesce(k.bytes, 0) AS fan_in,
               p.messages, p.senders
        FROM p FULL JOIN k ON p.rank = k.rank ORDER BY rank""",
    "matrix": f"SELECT sender, receiver, sum(size), count(*) FROM {m} GROUP BY sender, receiver",
    "full_scan": f"SELECT tag, sum(size) FROM {m} GROUP BY tag ORDER BY tag",
}
out = {"rows": {}}
for name, q in queries.items():
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        rows = con.execute(q).fetchall()
        best = min(best, time.perf_counter() - start)
    out[name] = best * 1e3
    out["rows"][name] = len(rows)
print(json.dumps(out))
