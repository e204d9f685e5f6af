"""How the peers benchmark measures one contender: an in-process sandbox (a uvicorn thread of this
interpreter, TCP_NODELAY set) that counts the status of every bulk request, and the contender's
processes run to their end, their CPU taken from RUSAGE_CHILDREN around them.

The sandbox runs in this process, not a child, so RUSAGE_CHILDREN holds the contender's processes
and whatever they waited for (a worker dlt forks, the tap and the target of a Singer pipe) and
nothing else. Peak RSS comes from os.wait4 of each process; for a pipe it is the sum of both
processes' peaks (they run side by side). Captured and doubled come from the sandbox's store.
"""

from __future__ import annotations

import os
import resource
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from connector.sandbox import Behaviour, SandboxServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness


class _BulkStatuses:
    """ASGI middleware: counts the status of each POST /persons/bulk answer (429s included,
    whoever the client is and whether or not it records them itself)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.counts: Counter[int] = Counter()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/persons/bulk"):
            await self.app(scope, receive, send)
            return

        async def counting(message: Any) -> None:
            if message["type"] == "http.response.start":
                self.counts[message["status"]] += 1
            await send(message)

        await self.app(scope, receive, counting)


@dataclass(frozen=True)
class Api(harness.Api):
    """The harness's Api (so its capture-sync config applies) plus `statuses`, which fills in as
    bulk requests are answered."""

    statuses: Counter[int] = field(default_factory=Counter)


@contextmanager
def sandbox(folder: Path, *, rate_limit: int, rate_window_s: float, rate_counting: str = "sliding") -> Iterator[Api]:
    """A fresh in-process sandbox on 127.0.0.1 (free port, own database) with one client, its rate
    limit counted by sliding window, fixed window or token bucket."""
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "sandbox.sqlite3"
    behaviour = Behaviour(rate_counting=rate_counting)  # type: ignore[arg-type]  # checked by Behaviour
    server = SandboxServer(db, port=0, rate_window_s=rate_window_s, behaviour=behaviour)
    counter = _BulkStatuses(server.app)
    server.app = counter  # type: ignore[assignment]  # start() serves whatever ASGI app this is
    key, secret = server.store.create_client("peers", rate_limit=rate_limit)
    base_url = server.start()
    try:
        yield Api(base_url, key, secret, db, counter.counts)
    finally:
        server.stop()


def store_counts(db: Path) -> tuple[int, int]:
    """(persons captured, persons captured more than once) in a stopped sandbox's database."""
    with sqlite3.connect(db) as con:
        captured = con.execute("SELECT count(*) FROM persons").fetchone()[0]
        doubled = con.execute(
            "SELECT count(*) FROM (SELECT identity FROM captures GROUP BY identity HAVING count(*) > 1)"
        ).fetchone()[0]
    return captured, doubled


@dataclass(frozen=True)
class Usage:
    exit_codes: tuple[int, ...]
    wall_s: float  # from the first spawn to the last exit
    cpu_s: float  # user + sys of every process of the contender
    peak_rss_mb: float  # sum of the processes' peaks


def run_processes(commands: Sequence[Sequence[str]], log: Path, env: dict[str, str]) -> Usage:
    """Run the commands as a pipeline (each one's stdout into the next; the last one's to `log`)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    procs: list[subprocess.Popen[bytes]] = []
    with log.open("ab") as out:
        t0 = time.perf_counter()
        for i, command in enumerate(commands):
            last = i == len(commands) - 1
            stdin = procs[-1].stdout if procs else None
            procs.append(
                subprocess.Popen(
                    list(command),
                    stdin=stdin,
                    stdout=out if last else subprocess.PIPE,
                    stderr=out,
                    env=env,
                )
            )
            if stdin is not None:
                stdin.close()  # the next process owns the pipe's reading end now
        codes, rss_kib = [], 0
        for proc in procs:
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            codes.append(proc.returncode)
            rss_kib += usage.ru_maxrss
        wall_s = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Usage(tuple(codes), wall_s, cpu_s, rss_kib / 1024)  # Linux: KiB
