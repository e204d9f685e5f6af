"""The benchmarks of issues 7, 15 and 23 in one run: a table of figure, value, target and whether it is
met, then the CPU per record of each pipeline stage (what figure 2 is made of, the ledger's stages on
both engines), and every measurement in benchmarks/results.json. With PostgreSQL installed, figure 1's
sliding windows run again with the ledger there (1b: the share of the ceiling and CPU per record of
both engines side by side).

    .venv/bin/python benchmarks/run_all.py [--quick]     (`make bench`)

Each figure is measured beside its comparison in the same run (the ceiling, the naive baseline,
the smaller sync), so the ratios hold on a busy machine even when the absolute numbers do not.
`--quick` runs every benchmark at a tenth of the issue's sizes, as a smoke test of the harness.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import btree_writes
import failover
import ha_throughput
import ledger_bench
import overhead
import pg_server
import rate_limited
import resume
import snapshot
import stages
import startup
from rich.console import Console
from rich.table import Table

RESULTS = Path(__file__).with_name("results.json")

FULL = {
    "rate_limited": 20_000,
    "overhead": (100_000, 10_000),
    "resume": 1_000_000,
    "ledger": 100_000,
    "btree_writes": 10_000,
    "stages": 30_000,
    "snapshot": 1_000_000,
    "failover": 8,
    "ha_throughput": 3_000,
}
QUICK = {
    "rate_limited": 3_000,
    "overhead": (10_000, 1_000),
    "resume": 100_000,
    "ledger": 10_000,
    "btree_writes": 2_000,
    "stages": 3_000,
    "snapshot": 10_000,
    "failover": 2,
    "ha_throughput": 300,
}


@dataclass(frozen=True)
class Row:
    figure: str
    value: str
    target: str
    met: bool | None  # None: a figure with nothing to meet


def rows(r: dict[str, Any]) -> list[Row]:
    rl, oh, res, led = r["rate_limited"], r["overhead"], r["resume"], r["ledger"]
    mem = oh["memory"]
    return [
        *_rate_limited_rows(rl),
        *_engines_rows(rl, r.get("rate_limited_pg")),
        Row(
            f"2. Overhead per record ({oh['records']:,} records, no rate limit)",
            f"connector {oh['connector_cpu_us_per_record']:,.0f} us CPU/record, {oh['connector_records_per_s']:,.0f} records/s; "
            f"naive httpx {oh['baseline_cpu_us_per_record']:,.0f} us, {oh['baseline_records_per_s']:,.0f} records/s; "
            f"ratio {oh['cpu_ratio']:.2f}x",
            f"<= {oh['cpu_target_ratio']:g}x the baseline",
            oh["cpu_ratio"] <= oh["cpu_target_ratio"],
        ),
        Row(
            "3. Memory (peak RSS of the sync)",
            f"{mem['small_peak_rss_mb']:.0f} MB at {mem['small_records']:,}, {mem['large_peak_rss_mb']:.0f} MB at "
            f"{mem['large_records']:,} records ({mem['ratio']:.2f}x)",
            f"within {mem['target_ratio'] - 1:.0%}",
            mem["ratio"] <= mem["target_ratio"],
        ),
        Row(
            f"4. Resume ({res['entries']:,}-entry ledger, {res['pending']:,} unsettled)",
            f"{res['first_request_s']:.3f} s from `replay` start to the first request",
            f"< {res['target_s']:g} s",
            res["first_request_s"] < res["target_s"],
        ),
        Row(
            f"5. Ledger ({led['entries']:,} entries, synchronous FULL)",
            f"{led['enqueued_per_s']:,.0f} enqueued/s, {led['settled_per_s']:,.0f} settled/s, "
            f"{led['bytes_per_entry']:,.0f} bytes/entry",
            "(reported)",
            None,
        ),
        *_btree_rows(r["btree_writes"]),
        *_startup_rows(r["startup"]),
        *_snapshot_rows(r["snapshot"]),
        *_failover_rows(r.get("failover")),
        _ha_throughput_row(r.get("ha_throughput")),
    ]


# B-tree writes per record on main cd5f44d (issue 24's "before"), from benchmarks/btree_writes.py: an
# entry inserted into a table of seven indexes (nine on PostgreSQL) and changing state twice.
BTREE_BEFORE = {"sqlite": 35.1, "postgresql": 32.1}


def _btree_rows(bw: dict[str, Any]) -> list[Row]:
    """Figure 5b (issue 24): table rows and index entries written per record, in all and by each pass
    (enqueue, claim, settle; `btree_writes.py` prints each pass's tables)."""
    return [
        Row(
            f"5b. B-tree writes per record, {engine} ({r['entries']:,} records enqueued, claimed, settled)",
            f"{r['per_record']:.1f} (before: {BTREE_BEFORE[engine]:g}; "
            + ", ".join(f"{p} {sum(tables.values()):.2f}" for p, tables in r["per_record_by_pass"].items())
            + ")",
            f"<= {BTREE_BEFORE[engine] / 3:.1f} (a third of before)",
            r["per_record"] <= BTREE_BEFORE[engine] / 3,
        )
        for engine, r in bw.items()
        if engine in BTREE_BEFORE  # beside them: the benchmark's own time
    ]


def _failover_rows(fo: dict[str, Any] | None) -> list[Row]:
    """Figure 8 (issue 23): from a SIGKILL of the leading daemon to the integration's next request."""
    if fo is None:
        return [Row("8. Failover (PostgreSQL ledger)", "not measured: no PostgreSQL binaries (set PG_BIN)", "", None)]
    return [
        Row(
            f"8. Failover: SIGKILL of the leader -> next request, {fo['kills']} kills, lease_s = {fo['lease_s']:g}",
            f"median {fo['median_s']:.2f} s, max {fo['max_s']:.2f} s",
            f"max <= lease_s * 4/3 + 1 s = {fo['bound_s']:g} s",
            fo["max_s"] <= fo["bound_s"],
        )
    ]


def _ha_throughput_row(ha: dict[str, Any] | None) -> Row:
    """Figure 9 (issue 23): integrations spread over daemons, against their rate ceilings together."""
    if ha is None:
        return Row(
            "9. Integrations on several daemons (PostgreSQL ledger)", "not measured: no PostgreSQL binaries", "", None
        )
    return Row(
        f"9. {ha['integrations']} integrations on {ha['daemons']} daemons, {ha['persons']:,} persons, "
        "each its own rate-limited API client",
        f"{ha['persons_per_s']:,.0f} persons/s against the sum of their ceilings "
        f"{ha['ceiling_persons_per_s']:,.0f} ({ha['ratio']:.2f}); {ha['leaders_at_end']} daemon(s) leading",
        "(reported)",
        None,
    )


def _snapshot_rows(sn: dict[str, Any]) -> list[Row]:
    """Figure 7 (issue 22): a snapshot pass over an unchanged file, and over the same rows written anew."""
    return [
        Row(
            f"7. Snapshot pass over an unchanged {sn['rows']:,}-row CSV, against reading it",
            f"{sn['unchanged_pass_s']:.2f} s against {sn['read_s']:.2f} s ({sn['ratio']:.2f}x)",
            f"<= {sn['target']:g}x",
            sn["ratio"] <= sn["target"],
        ),
        Row(
            "   the same rows written anew (every row read, none mapped)",
            f"{sn['same_content_pass_s']:.2f} s ({sn['same_content_ratio']:.2f}x); a rewrite with "
            f"{sn['rewritten_expected']} new or changed rows enqueued {sn['rewritten_sent']}",
            "(reported)",
            None,
        ),
    ]


def _startup_rows(su: dict[str, Any]) -> list[Row]:
    """Figure 6 (issue 15): whole-process wall time, median of a few runs, on a ledger as big as resume's."""
    return [
        Row(
            f"6. Start-up: `--help`, median of {su['runs']}",
            f"{su['help_median_s']:.3f} s (min {min(su['help_s']):.3f}, max {max(su['help_s']):.3f})",
            f"< {su['help_target_s']:g} s",
            su["help_median_s"] < su["help_target_s"],
        ),
        Row(
            f"   `status` on {su['entries']:,} entries, median of {su['runs']}",
            f"{su['status_median_s']:.3f} s (min {min(su['status_s']):.3f}, max {max(su['status_s']):.3f})",
            f"< {su['status_target_s']:g} s",
            su["status_median_s"] < su["status_target_s"],
        ),
    ]


def _rate_limited_rows(rl: dict[str, Any]) -> list[Row]:
    """Figure 1: a heading, then one row per window and counting (the window unknown to capture-sync)."""
    out = [
        Row(
            f"1. Rate-limited, {rl['ceiling_persons_per_s']:,.0f} persons/s, window unknown: whole run "
            "beside the best possible schedule, and 429s",
            "",
            "",
            None,
        )
    ]
    for s in rl["scenarios"]:
        out.append(
            Row(
                f"   {s['records']:,} records, {s['rate_limit']}, {s['counting']} counting",
                f"{s['whole_run_s']:.1f} s, best {s['best_s']:.1f} s: ratio {s['ratio']:.3f} "
                f"(delivery phase {s['delivery_ratio']:.3f}); "
                f"429s {s['answered_429']} of {s['requests']} = {s['share_429']:.2%}",
                f"ratio <= {rate_limited.RATIO_TARGET}; 429s <= {rate_limited.LEARNING_429} or "
                f"< {rate_limited.SHARE_429_TARGET:.1%}",
                s["met"],
            )
        )
    return out


def _engines_rows(rl: dict[str, Any], pg: dict[str, Any] | None) -> list[Row]:
    """Figure 1b (issue 23): the sliding windows of figure 1 again with the ledger on PostgreSQL,
    beside SQLite's from the same run: the share of the ceiling reached and the sync's CPU per record."""
    if pg is None:
        return [Row("1b. Rate-limited on PostgreSQL beside SQLite", "not measured: no PostgreSQL binaries", "", None)]
    out = [
        Row(
            "1b. Rate-limited, ledger on PostgreSQL beside SQLite (sliding counting): share of the ceiling "
            "over the whole run (delivery phase), the sync's CPU per record (the server's not in it)",
            "",
            "",
            None,
        )
    ]
    sqlite = {(s["window_s"], s["counting"]): s for s in rl["scenarios"]}
    for p in pg["scenarios"]:
        s = sqlite.get((p["window_s"], p["counting"]))
        if s is None:
            continue
        out.append(
            Row(
                f"   {p['records']:,} records, {p['rate_limit']}",
                " ; ".join(
                    f"{name} {e['ceiling_share']:.0%} ({e['delivery_ceiling_share']:.0%}), "
                    f"{e['cpu_us_per_record']:,.0f} us CPU/record"
                    for name, e in (("SQLite", s), ("PostgreSQL", p))
                ),
                "(reported)",
                None,
            )
        )
    return out


def render(table_rows: list[Row], console: Console) -> None:
    table = Table(title="capture-sync benchmarks (issue 7)")
    for column in ("figure", "value", "target", "met"):
        table.add_column(column, overflow="fold")
    for row in table_rows:
        met = "-" if row.met is None else ("yes" if row.met else "NO")
        table.add_row(row.figure, row.value, row.target, met)
    console.print(table)


def render_stages(r: dict[str, Any], console: Console) -> None:
    """Figure 2 explained: the connector's stages beside the baseline's, from benchmarks/stages.py."""
    table = Table(title=f"where figure 2's CPU goes (benchmarks/stages.py, {r['records']:,} records)")
    table.add_column("stage")
    table.add_column("us CPU/record", justify="right")
    table.add_column("us wall/record", justify="right")
    wall = r.get("wall_us_per_record", {})
    for name, value in r["cpu_us_per_record"].items():
        table.add_row(name, f"{value:.1f}", f"{wall[name]:.1f}" if name in wall else "")
    console.print(table)
    if not any("PostgreSQL" in name for name in wall):
        console.print("[dim]the ledger on PostgreSQL: not measured (no PostgreSQL binaries; set PG_BIN)[/dim]")


def timed(name: str, fn: Callable[[], dict[str, Any]], console: Console) -> dict[str, Any]:
    console.print(f"[dim]running {name}...[/dim]")
    t0 = time.perf_counter()
    result = fn()
    result["benchmark_s"] = round(time.perf_counter() - t0, 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the issue's sizes (a smoke test)")
    parser.add_argument("--output", type=Path, default=RESULTS, help=f"where the JSON goes (default {RESULTS})")
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    # On a pipe (make bench | tee) rich would fold the table into 80 columns.
    console = Console(highlight=False, width=shutil.get_terminal_size((150, 24)).columns)
    results: dict[str, Any] = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}",
        "quick": args.quick,
    }
    results["rate_limited"] = timed("rate-limited throughput", lambda: rate_limited.run(sizes["rate_limited"]), console)
    results["overhead"] = timed("overhead and memory", lambda: overhead.run(*sizes["overhead"]), console)
    results["resume"] = timed("resume", lambda: resume.run(sizes["resume"], sizes["resume"] // 100), console)
    results["ledger"] = timed("ledger", lambda: ledger_bench.run(sizes["ledger"], "FULL"), console)
    with pg_server.throwaway_database(durable=True) as pg_url:  # None without PostgreSQL: SQLite alone
        results["stages"] = timed("CPU by stage", lambda: stages.run(sizes["stages"], pg_url), console)
        if pg_url is not None:  # figure 1's sliding windows again, the ledgers in PostgreSQL (1b)
            results["rate_limited_pg"] = timed(
                "rate-limited throughput on PostgreSQL",
                lambda: rate_limited.run(sizes["rate_limited"], countings=("sliding",), ledger_url=pg_url),
                console,
            )
    with pg_server.throwaway_database() as pg_url:  # a fresh database: its statistics count this run alone
        results["btree_writes"] = timed(
            "B-tree writes", lambda: btree_writes.run(sizes["btree_writes"], pg_url), console
        )
    results["startup"] = timed("start-up", lambda: startup.run(sizes["resume"]), console)  # resume's ledger size
    results["snapshot"] = timed("snapshot mode", lambda: snapshot.run(sizes["snapshot"]), console)
    if pg_server.bindir() is not None:
        results["failover"] = timed("failover", lambda: failover.run(sizes["failover"]), console)
        results["ha_throughput"] = timed(
            "integrations on several daemons", lambda: ha_throughput.run(sizes["ha_throughput"]), console
        )
    table_rows = rows(results)
    results["table"] = [asdict(row) for row in table_rows]
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    render(table_rows, console)
    render_stages(results["stages"], console)
    console.print(f"{results['machine']}; {results['measured_at']}; written to {args.output}")


if __name__ == "__main__":
    main()
