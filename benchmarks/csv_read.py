"""A 1,000,000-row CSV read by the csv source and mapped to capture inputs: rows per second and
peak RSS (target: under 150 MB, i.e. memory does not grow with the file).

    .venv/bin/python benchmarks/csv_read.py [--rows 1000000]

The CSV is generated in a temporary folder first. Each record's state is kept as the engine keeps
it (only the last one), so the figure is the source and the mapper, not a list of results.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import tempfile
import time
from pathlib import Path

from connector.api.models import PersonInput
from connector.mapping import Mapping
from connector.plugins import build_source

RSS_TARGET_MB = 150
MAPPING = {
    "first_name": "First",
    "last_name": "Last",
    "name": {"template": "{First} {Last}"},
    "email": {"field": "Email", "transform": ["strip", "lower"]},
    "phone": {"field": "Phone", "transform": "e164", "region": "US"},
    "company": "Company",
    "custom_fields": {"plan": "Plan"},
}


def generate(path: Path, rows: int, *, messy: bool = True) -> None:
    """`messy`: emails to strip and lower-case and every 50th one invalid (2% rejected), phones to
    format, as exports come. Clean rows are already what the mapping produces, so a client that
    posts them as they are (the naive baseline) sends the very persons the connector sends."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["id", "First", "Last", "Email", "Phone", "Company", "Plan"])
        for i in range(rows):
            if messy:
                email = f" Person.{i}@Example.com " if i % 50 else "not-an-email"
                phone, plan = f"(415) 555-{i % 10000:04d}", "pro" if i % 3 else ""
            else:
                email, phone, plan = f"person.{i}@example.com", f"+1415555{i % 10000:04d}", "pro" if i % 3 else "basic"
            out.writerow([i, f"Person{i % 997}", f"Number{i}", email, phone, "Example, Inc.", plan])


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def run(rows: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "contacts.csv"
        generate(path, rows)
        size_mb = os.path.getsize(path) / 1e6
        source = build_source("bench", "csv", {"path": str(path), "primary_key": "id"})
        mapping = Mapping.from_config(MAPPING, where="sources.bench.mapping")

        t0 = time.perf_counter()
        read = sum(1 for _ in source.read(None))
        read_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        mapped = accepted = 0
        state = None
        for record in source.read(None):
            accepted += isinstance(mapping.map(record.data), PersonInput)
            mapped += 1
            state = record.state
        map_s = time.perf_counter() - t0
    assert read == mapped == rows and state is not None
    return {
        "rows": rows,
        "file_mb": size_mb,
        "read_rows_per_s": read / read_s,
        "read_and_map_rows_per_s": mapped / map_s,
        "accepted": accepted,
        "peak_rss_mb": peak_rss_mb(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    r = run(args.rows)
    verdict = "under" if r["peak_rss_mb"] < RSS_TARGET_MB else "OVER"
    print(f"csv source: {r['rows']:,} rows, {r['file_mb']:.1f} MB file")
    print(f"  read          {r['read_rows_per_s']:>10,.0f} rows/s")
    print(f"  read + map    {r['read_and_map_rows_per_s']:>10,.0f} rows/s ({r['accepted']:,} valid inputs)")
    print(f"  peak RSS      {r['peak_rss_mb']:>10,.1f} MB ({verdict} the {RSS_TARGET_MB} MB target)")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
