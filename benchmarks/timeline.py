"""Where a sync's wall time goes with no rate limit (issue 24): one `capture-sync sync` of the peers'
contacts, run in this process with `time.perf_counter` spans around each wait, then summarised.

    .venv/bin/python benchmarks/timeline.py --records 20000 [--latency-ms 80] [--spans spans.json]

Spans (per thread, or per delivery worker through a context variable that `asyncio.to_thread` and
`GroupCommit`'s threads carry): the HTTP exchange of each request, each thread hop of a claim or
settle (from the worker's hand-over to its return, split into the wait for a thread, the wait for
the ledger's lock, the transaction's body and its COMMIT, which is the fsync under synchronous =
FULL), the read's enqueue and its pauses in `room_to_read`. Printed: the share of the delivery's time with
0-4 requests in flight, where each worker's time goes while it has no request out, and where the
read's goes; with group commit (`delivery/_group.py`) the commits, the group commits and the
batches per group. Structural shares, not a timing figure: the machine is shared, compare runs A/B.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import delivered, sandbox, write_config

sys.path.insert(0, str(Path(__file__).with_name("peers")))
from contacts import generate  # benchmarks/peers is not a package

from connector.api import CaptureClient
from connector.delivery import deliver, engine
from connector.ledger import Ledger
from connector.ledger._sqlite import SqliteDb, SqliteStore

Span = tuple[str, str, float, float]  # who (worker n, "read", thread name), what, start, end
SPANS: list[Span] = []
GROUPS: list[tuple[int, int]] = []  # (batches settled, steps) per group commit
WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="")


def _who() -> str:
    return WHO.get() or threading.current_thread().name


def _span(what: str, t0: float, who: str | None = None) -> None:
    SPANS.append((who or _who(), what, t0, time.perf_counter()))  # list.append is atomic under the GIL


def _timed(owner: Any, name: str, what: str) -> None:
    """Wrap a plain method so that each call is a span."""
    original = getattr(owner, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            _span(what, t0)

    setattr(owner, name, wrapped)


def _timed_async(owner: Any, name: str, what: str) -> None:
    original = getattr(owner, name)

    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await original(*args, **kwargs)
        finally:
            _span(what, t0)

    setattr(owner, name, wrapped)


HANDED: contextvars.ContextVar[tuple[float, dict[str, float]]] = contextvars.ContextVar("handed")


def _hop_of_steps(group_commit: Any) -> None:
    """`hop.queue` from a step's hand-over to its thread's start, `hop.back` from the end of its settle
    to its answer on the loop, as `to_thread`'s hop is timed. The step's thread runs in the context the
    worker handed it in (`GroupCommit` copies it), so the spans are the worker's."""
    original_call, original_settle = group_commit.__call__, group_commit._settle

    def call(self: Any, settlement: Any) -> Any:
        done: dict[str, float] = {}
        HANDED.set((time.perf_counter(), done))  # in the worker's task: copied with the step
        answer = original_call(self, settlement)
        answer.add_done_callback(lambda _: _span("hop.back", done.get("at", time.perf_counter())))
        return answer

    def settle(self: Any, step: Any) -> Any:
        handed, done = HANDED.get()
        _span("hop.queue", handed)
        try:
            return original_settle(self, step)
        finally:
            done["at"] = time.perf_counter()

    group_commit.__call__, group_commit._settle = call, settle


def instrument() -> None:
    counter = iter(range(1_000))

    original_worker = deliver.Delivery._worker

    async def worker(self: deliver.Delivery) -> None:
        WHO.set(f"worker {next(counter)}")
        await original_worker(self)

    deliver.Delivery._worker = worker  # type: ignore[method-assign]

    original_to_thread = asyncio.to_thread

    async def to_thread(func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """The hop: `hop.queue` until a thread runs it, `hop.back` until the loop resumes the caller."""
        t0 = time.perf_counter()
        marks: dict[str, float] = {}

        def run() -> Any:
            _span("hop.queue", t0)
            try:
                return func(*args, **kwargs)
            finally:
                marks["done"] = time.perf_counter()

        result = await original_to_thread(run)
        _span("hop.back", marks["done"])
        return result

    deliver.asyncio.to_thread = to_thread  # type: ignore[attr-defined]  # the module's own name: engine keeps its own

    original_write = SqliteStore.write
    original_read = SqliteStore.read

    @contextmanager
    def write(self: SqliteStore, run_in_hand: int | None) -> Iterator[SqliteDb]:
        t0 = time.perf_counter()
        with self._lock:
            _span("lock.write", t0)
            t1 = time.perf_counter()
            with original_write(self, run_in_hand) as db:
                yield db
            _span("txn", t1)

    @contextmanager
    def read(self: SqliteStore) -> Iterator[SqliteDb]:
        t0 = time.perf_counter()
        with self._lock:
            _span("lock.read", t0)
            t1 = time.perf_counter()
            with original_read(self) as db:
                yield db
            _span("read", t1)

    SqliteStore.write = write  # type: ignore[method-assign,assignment]
    SqliteStore.read = read  # type: ignore[method-assign,assignment]

    original_execute = SqliteDb.execute

    def execute(self: SqliteDb, sql: str, *args: Any) -> Any:
        if sql != "COMMIT":
            return original_execute(self, sql, *args)
        t0 = time.perf_counter()
        try:
            return original_execute(self, sql, *args)
        finally:
            _span("commit", t0)

    SqliteDb.execute = execute  # type: ignore[method-assign,assignment]

    _timed_async(CaptureClient, "capture_bulk", "http")
    _timed(deliver.Delivery, "room_to_read", "room_to_read")
    _timed(Ledger, "enqueue", "enqueue")
    _timed(Ledger, "backlog", "backlog")
    _timed(Ledger, "raw_digests", "raw_digests")
    if hasattr(deliver, "GroupCommit"):  # group commit: one span per group of settles and claims, its size kept
        from connector.ledger import _settle

        original_group = _settle.settle_group  # type: ignore[attr-defined]

        def settle_group(db: Any, group: Any, now: float) -> Any:
            GROUPS.append((sum(1 for s in group if s.batch is not None), len(group)))
            return original_group(db, group, now)

        _settle.settle_group = settle_group  # type: ignore[attr-defined]
        _timed(deliver.GroupCommit, "_commit", "group")  # type: ignore[attr-defined]
        if hasattr(deliver.GroupCommit, "_serve"):  # its own threads, not to_thread: the same two hop spans
            _hop_of_steps(deliver.GroupCommit)  # type: ignore[attr-defined]
    else:  # the base before it: a hop per claim and per settle
        _timed(deliver.Delivery, "_claim", "claim")
        _timed(deliver.Delivery, "_settle", "settle")
    original_read_all = engine._read_all

    def read_all(*args: Any) -> None:
        WHO.set("read")
        t0 = time.perf_counter()
        try:
            original_read_all(*args)
        finally:
            _span("read.all", t0)

    engine._read_all = read_all  # type: ignore[assignment]


def _union(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def in_flight(spans: list[Span], start: float, stop: float) -> dict[int, float]:
    """Seconds with n requests out, between the first request and the last answer."""
    edges = sorted(
        [(a, 1) for _, what, a, _ in spans if what == "http"] + [(b, -1) for _, what, _, b in spans if what == "http"]
    )
    shares: dict[int, float] = defaultdict(float)
    n, last = 0, start
    for t, step in edges:
        shares[n] += t - last
        n, last = n + step, t
    shares[n] += stop - last
    return dict(shares)


def latency_by_in_flight(spans: list[Span]) -> dict[int, float]:
    """Median HTTP latency (ms) by the number of requests out when it left, itself included: a
    server that serves one request at a time answers n in flight in about n times one's latency."""
    http = sorted((a, b) for _, what, a, b in spans if what == "http")
    by: dict[int, list[float]] = defaultdict(list)
    for a, b in http:
        by[sum(1 for x, y in http if x <= a < y)].append((b - a) * 1000)
    return {n: round(statistics.median(v), 1) for n, v in sorted(by.items())}


def summarise(spans: list[Span]) -> dict[str, Any]:
    http = [s for s in spans if s[1] == "http"]
    first, last = min(s[2] for s in http), max(s[3] for s in http)
    read = [s for s in spans if s[0] == "read"]
    read_all = next(s for s in read if s[1] == "read.all")
    busy = last - first
    by_who: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for who, what, a, b in spans:
        by_who[who][what] += b - a
    workers = sorted(w for w in by_who if w.startswith("worker"))
    worker_totals: dict[str, float] = defaultdict(float)
    for w in workers:
        for what, s in by_who[w].items():
            worker_totals[what] += s
    n_workers = max(len(workers), 1)
    per_worker = {what: s / n_workers for what, s in worker_totals.items()}
    per_worker["no request out"] = busy - per_worker.get("http", 0.0)  # claims and settles overlap requests
    flight = in_flight(spans, first, last)
    return {
        "read_s": round(read_all[3] - read_all[2], 3),
        "delivery_s": round(busy, 3),
        "read_ends_before_last_answer_s": round(last - read_all[3], 3),
        "in_flight_share": {n: round(s / busy, 3) for n, s in sorted(flight.items())},
        "mean_in_flight": round(sum(n * s for n, s in flight.items()) / busy, 2),
        "latency_ms_by_in_flight": latency_by_in_flight(spans),
        "requests": len(http),
        "per_worker_s": {k: round(v, 3) for k, v in sorted(per_worker.items())},
        "read_thread_s": {k: round(v, 3) for k, v in sorted(by_who["read"].items())},
        "commits": sum(1 for s in spans if s[1] == "commit"),
        "groups": len(GROUPS),
        "batches_per_group": round(sum(b for b, _ in GROUPS) / len(GROUPS), 2) if GROUPS else None,
        "largest_group": max((n for _, n in GROUPS), default=None),
        "commit_s_total": round(sum(s[3] - s[2] for s in spans if s[1] == "commit"), 3),
        "ledger_lock_held_share": round(
            _union([(a, b) for _, what, a, b in spans if what in ("txn", "read")]) / busy, 3
        ),
    }


def _children_cpu_s() -> float:
    """User + sys CPU of this process's live children (the sandbox), from /proc."""
    total = 0.0
    for task in Path("/proc/self/task").iterdir():
        for pid in (task / "children").read_text().split():
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--spans", type=Path, help="also write every span here as JSON")
    parser.add_argument(
        "--latency-ms", type=int, default=0, help="the sandbox adds this to every answer: a CRM across a network"
    )
    args = parser.parse_args()
    instrument()
    from connector.cli import main as cli

    with tempfile.TemporaryDirectory(prefix="capture-sync-timeline-") as tmp:
        folder = Path(tmp)
        csv = folder / "contacts.csv"
        generate(csv, args.records)
        with sandbox(folder / "run", latency_ms=args.latency_ms or None) as api:
            config = write_config(folder / "run", api, csv)
            os.environ.update(api.env())
            sys.argv = ["capture-sync", "sync", "-c", str(config)]
            t0 = time.perf_counter()
            try:
                cli()
            except SystemExit as done:
                if done.code not in (0, None):
                    raise
            wall = time.perf_counter() - t0
            sandbox_cpu = _children_cpu_s()
        taken = delivered(folder / "run" / "ledger.sqlite3")
    if taken != args.records:
        raise SystemExit(f"{taken} of {args.records} delivered")
    own_cpu = sum(os.times()[:2])
    summary = {
        "records": args.records,
        "wall_s": round(wall, 3),
        "cpu_s": round(own_cpu, 3),
        "sandbox_cpu_s": round(sandbox_cpu, 3),
        **summarise(SPANS),
    }
    if args.spans:
        args.spans.write_text(json.dumps(SPANS))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    os.chdir(Path(__file__).parent)
    main()
