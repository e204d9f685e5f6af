"""capture-sync beside its peers (issue 15, `make bench-peers`): the same CSV job run by
capture-sync, a dlt pipeline, a Singer SDK tap piped into a target, and a plain httpx loop, in
alternating rounds against an in-process sandbox on 127.0.0.1.

    .venv/bin/python benchmarks/peers/run.py [--rounds 3] [--records 100000] [--rate-records 20000]
        [--rate-windows 1,10,60] [--rate-counting sliding,fixed,bucket]

Per contender, medians over the rounds: CPU per record (user + sys of all its processes), wall
time and peak RSS with no rate limit; persons captured and captured twice (from the sandbox's
store); and, with a client limited to 1,200 persons/s (12 requests per 1 s, 120 per 10 s, 720 per
60 s), counted by sliding window, fixed window or token bucket, each one's whole-run time beside
the best possible schedule (the limit alone: `connector.sandbox.ratelimit.best_finish` with
answers taking no time) and the number of bulk requests answered 429.
Each run gets a fresh sandbox; the order of the contenders rotates from round to round, so drift
on this shared machine falls on each of them alike. Figures go to a table and to results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from contacts import generate
from contenders import CONTENDERS, Job
from measure import run_processes, sandbox, store_counts
from rich.console import Console
from rich.table import Table

from connector.sandbox.ratelimit import best_finish

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.json"
PEERS_PYTHON = HERE.parents[1] / ".venv-peers" / "bin" / "python"
UNLIMITED = 1_000_000_000
RATE_PER_S, BATCH = 12, 100  # requests per second of window: 12 / 1 s, 120 / 10 s, 720 / 60 s
CEILING = RATE_PER_S * BATCH  # persons/s


@dataclass(frozen=True)
class Run:
    contender: str
    round: int
    rate_limited: bool
    records: int
    exit_codes: tuple[int, ...]
    wall_s: float
    cpu_us_per_record: float
    peak_rss_mb: float
    captured: int
    doubled: int
    requests: int
    answered_429: int
    window_s: float = 0.0  # rate-limited runs: the window and how the sandbox counts it
    counting: str = ""

    @property
    def share_of_ceiling(self) -> float:
        return self.captured / self.wall_s / CEILING

    @property
    def scenario(self) -> str:
        return f"{self.window_s:g} s {self.counting}"


def run_once(
    name: str,
    round_no: int,
    folder: Path,
    csv_path: Path,
    records: int,
    rate: tuple[float, str] | None,
    peers_python: Path,
    tell_window: bool,
) -> Run:
    rate_limited = rate is not None
    window, counting = rate or (60.0, "sliding")
    limit = int(RATE_PER_S * window) if rate_limited else UNLIMITED
    with sandbox(folder, rate_limit=limit, rate_window_s=window, rate_counting=counting) as api:
        job = Job(folder, csv_path, api, peers_python, window if tell_window or not rate_limited else None)
        commands, env = CONTENDERS[name](job)
        usage = run_processes(commands, folder / "contender.log", env)
        statuses = dict(api.statuses)
    captured, doubled = store_counts(api.db)
    return Run(
        name,
        round_no,
        rate_limited,
        records,
        usage.exit_codes,
        usage.wall_s,
        usage.cpu_s / records * 1e6,
        usage.peak_rss_mb,
        captured,
        doubled,
        sum(statuses.values()),
        statuses.get(429, 0),
        window if rate_limited else 0.0,
        counting if rate_limited else "",
    )


def best_s(records: int, window_s: float, counting: str) -> float:
    """The best possible schedule of a rate-limited run: the limit alone, answers taking no time."""
    return best_finish(
        -(-records // BATCH),
        1,
        int(RATE_PER_S * window_s),
        window_s,
        counting,  # type: ignore[arg-type]
        concurrency=1,
        service_s=0.0,
    )


def median(runs: list[Run], field: str) -> float:
    return statistics.median(getattr(r, field) for r in runs)


def summary(runs: list[Run]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name in CONTENDERS:
        free = [r for r in runs if r.contender == name and not r.rate_limited]
        limited = [r for r in runs if r.contender == name and r.rate_limited]
        out[name] = {"all_exited_0": all(set(r.exit_codes) == {0} for r in free + limited)}
        if free:
            out[name] |= {
                "cpu_us_per_record": median(free, "cpu_us_per_record"),
                "cpu_us_per_record_range": [
                    min(r.cpu_us_per_record for r in free),
                    max(r.cpu_us_per_record for r in free),
                ],
                "wall_s": median(free, "wall_s"),
                "peak_rss_mb": median(free, "peak_rss_mb"),
                "captured": min(r.captured for r in free),
                "doubled": max(r.doubled for r in free),
            }
        if limited:
            out[name]["rate_limited"] = {
                scenario: {
                    "wall_s": median(these, "wall_s"),
                    "best_s": best_s(these[0].records, these[0].window_s, these[0].counting),
                    "answered_429": median(these, "answered_429"),
                    "requests": median(these, "requests"),
                    "captured": min(r.captured for r in these),
                    "doubled": max(r.doubled for r in these),
                }
                for scenario in dict.fromkeys(r.scenario for r in limited)
                for these in [[r for r in limited if r.scenario == scenario]]
            }
    return out


def table(result: dict[str, Any]) -> Table:
    p = result["parameters"]
    t = Table(
        title=(
            f"capture-sync and its peers: medians of {p['rounds']} alternating rounds, {p['records']:,} records, no rate limit"
        )
    )
    for column in ("contender", "CPU/record", "wall", "peak RSS", "captured", "doubled"):
        t.add_column(column, justify="left" if column == "contender" else "right")
    for name, s in result["summary"].items():
        lo, hi = s["cpu_us_per_record_range"]
        t.add_row(
            name + ("" if s["all_exited_0"] else " (a run failed)"),
            f"{s['cpu_us_per_record']:,.0f} us ({lo:,.0f}-{hi:,.0f})",
            f"{s['wall_s']:.1f} s",
            f"{s['peak_rss_mb']:,.0f} MB",
            f"{s['captured']:,}",
            f"{s['doubled']:,}",
        )
    return t


def rate_table(result: dict[str, Any]) -> Table | None:
    """Rate-limited runs: per window and counting, each contender's whole-run time over the best
    possible schedule, and its 429s."""
    p, summary_ = result["parameters"], result["summary"]
    names = [n for n, s in summary_.items() if "rate_limited" in s]
    if not names:
        return None
    t = Table(
        title=(
            f"rate-limited: {p['rate_records']:,} records at {CEILING:,.0f} persons/s, medians of {p['rounds']} rounds: "
            "whole run s / best possible s = ratio, 429s"
        )
    )
    t.add_column("window, counting")
    for name in names:
        t.add_column(name, justify="right")
    for scenario in summary_[names[0]]["rate_limited"]:
        cells = []
        for name in names:
            r = summary_[name]["rate_limited"][scenario]
            ratio = f"{r['wall_s'] / r['best_s']:.2f}" if r["best_s"] > 0 else "- (the limit never binds)"
            cells.append(
                f"{r['wall_s']:.1f} / {r['best_s']:.1f} = {ratio}, "
                f"{r['answered_429']:,.0f} x 429" + ("" if r["doubled"] == 0 else f", {r['doubled']} doubled")
            )
        t.add_row(scenario, *cells)
    return t


def tree() -> str:
    """The commit capture-sync ran from, "+dirty" when the work tree had uncommitted changes."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True).stdout.strip()

    return git("rev-parse", "--short", "HEAD") + ("+dirty" if git("status", "--porcelain", "--", "connector") else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=100_000, help="rows of the run with no rate limit")
    parser.add_argument("--rate-records", type=int, default=20_000, help="rows of the rate-limited run (0: skip it)")
    parser.add_argument(
        "--rate-windows", default="1", help="windows of the rate-limited runs, seconds, comma-separated"
    )
    parser.add_argument(
        "--rate-counting",
        default="sliding",
        help="how the sandbox counts them: sliding, fixed, bucket (comma-separated)",
    )
    parser.add_argument("--peers-python", type=Path, default=PEERS_PYTHON, help="the interpreter of .venv-peers")
    parser.add_argument(
        "--told",
        action="store_true",
        help="tell capture-sync the window (rate_window_s = 1) in the rate-limited run; by default it is "
        "left unset, as no peer is told it, and the limiter finds it",
    )
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    if not args.peers_python.exists():
        parser.error(f"{args.peers_python} is missing: `make bench-peers` creates .venv-peers")

    console = Console(width=max(Console().width, 150))  # the tables' columns, even in a log
    rates = [(float(w), c) for w in args.rate_windows.split(",") for c in args.rate_counting.split(",")]
    names = list(CONTENDERS)
    runs: list[Run] = []
    started, capture_sync_tree = time.time(), tree()  # at the start: others may commit while it runs
    with tempfile.TemporaryDirectory(prefix="capture-sync-peers-") as tmp:
        folder = Path(tmp)
        big, small = folder / "contacts.csv", folder / "contacts-rate-limited.csv"
        if args.records:
            generate(big, args.records)
        if args.rate_records:
            generate(small, args.rate_records)
        for round_no in range(args.rounds):
            order = names[round_no % len(names) :] + names[: round_no % len(names)]
            plan: list[tuple[str, tuple[float, str] | None]] = [(n, None) for n in order if args.records]
            plan += [(n, rate) for rate in rates for n in order] if args.rate_records else []
            for name, rate in plan:
                limited = rate is not None
                records = args.rate_records if limited else args.records
                where = f"limited-{rate[0]:g}-{rate[1]}" if rate is not None else "free"
                run_folder = folder / f"r{round_no}-{name}-{where}"
                run = run_once(
                    name,
                    round_no,
                    run_folder,
                    small if limited else big,
                    records,
                    rate,
                    args.peers_python,
                    args.told,
                )
                runs.append(run)
                console.print(
                    f"round {round_no + 1} {name:<12} {'rate-limited' if limited else 'no limit':<12} "
                    f"exit {','.join(map(str, run.exit_codes))}  {run.wall_s:6.1f} s  "
                    f"{run.cpu_us_per_record:5.0f} us/record  {run.captured:,} captured, {run.doubled} doubled, "
                    f"{run.answered_429} x 429"
                    + (f"  {run.scenario}: best {best_s(records, *rate):.1f} s" if rate is not None else "")
                )
                if set(run.exit_codes) != {0}:
                    console.print(f"[red]{name} failed; its log:[/red]")
                    console.print((run_folder / "contender.log").read_text()[-3000:], markup=False)

    result = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "capture_sync_tree": capture_sync_tree,
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()},
        "parameters": {
            "rounds": args.rounds,
            "records": args.records,
            "rate_records": args.rate_records,
            "rate_limits": [f"{int(RATE_PER_S * w)} requests / {w:g} s, {c}" for w, c in rates],
            "ceiling_persons_per_s": CEILING,
            "capture_sync_told_window": args.told,
            "seconds": round(time.time() - started, 1),
        },
        "summary": summary(runs),
        "runs": [asdict(r) | {"share_of_ceiling": r.share_of_ceiling} for r in runs],
    }
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    if args.records:
        console.print(table(result))
    if (limited_table := rate_table(result)) is not None:
        console.print(limited_table)
    console.print(f"every run: {args.output}")
    failed = sorted({r.contender for r in runs if set(r.exit_codes) != {0}})
    if failed:
        raise SystemExit(f"failed runs ({', '.join(failed)}): their logs are printed above")


if __name__ == "__main__":
    main()
