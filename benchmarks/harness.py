"""What the end-to-end benchmarks share: a sandbox child process with one API client, a config file
for a CSV source, and `capture-sync` run as a child process whose own CPU time and peak RSS come
from os.wait4 (so neither the sandbox nor this interpreter is counted).

Everything listens on and talks to 127.0.0.1 only.
"""

from __future__ import annotations

import compileall
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from csv_read import MAPPING

from connector.sandbox import SandboxStore, spawn_sandbox

CLI = Path(sys.executable).with_name("capture-sync")
UNLIMITED = 1_000_000_000  # requests per window: "no rate limit"
ROOT = Path(__file__).resolve().parent.parent


def as_installed() -> None:
    """Write capture-sync's bytecode, as `pip install` does: the tree is an editable install, and with
    PYTHONDONTWRITEBYTECODE set (as in CI-like shells) every child would compile its modules again,
    some 50 ms of a short command's start-up that an installed tool never pays."""
    for package in ("connector", "sources"):
        compileall.compile_dir(ROOT / package, quiet=1)


as_installed()


@dataclass(frozen=True)
class Api:
    """A running sandbox and the credentials of its one client."""

    base_url: str
    api_key: str
    api_secret: str
    db: Path

    def env(self) -> dict[str, str]:
        return {**os.environ, "CAPTURE_API_KEY": self.api_key, "CAPTURE_API_SECRET": self.api_secret}


def alternately(trees: dict[str, Path], rounds: int) -> Iterator[tuple[int, str, Path]]:
    """(round, name, tree) for each tree of each round, the order swapped each round (this, base, then
    base, this), so that a busy moment of the machine falls on every tree."""
    for r in range(rounds):
        for name, tree in trees.items() if r % 2 == 0 else reversed(trees.items()):
            yield r, name, tree


@contextmanager
def sandbox(folder: Path, *, rate_limit: int = UNLIMITED, **flags: Any) -> Iterator[Api]:
    """A fresh `capture-sync sandbox serve` child (own database) with one client; flags as in spawn_sandbox."""
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "sandbox.sqlite3"
    with SandboxStore(db) as store:
        key, secret = store.create_client("bench", rate_limit=rate_limit)
    process = spawn_sandbox(db, folder / "sandbox.log", **flags)
    try:
        yield Api(process.base_url, key, secret, db)
    finally:
        process.stop()


def _toml(value: Any) -> str:
    """Enough TOML for MAPPING and the settings below: strings, numbers, lists, inline tables."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)  # a JSON string or number is a TOML basic string or number


def write_config(
    folder: Path,
    api: Api,
    csv_path: Path,
    *,
    rate_window_s: float = 60.0,
    concurrency: int = 4,
    synchronous: str = "FULL",
) -> Path:
    """A capture-sync.toml for one CSV source; credentials travel in the environment (Api.env)."""
    capture = {
        "base_url": api.base_url,
        "batch_size": 100,
        "concurrency": concurrency,
        "rate_window_s": rate_window_s,
    }
    lines = ["[capture]", *(f"{k} = {_toml(v)}" for k, v in capture.items()), ""]
    lines += ["[ledger]", f"path = {_toml(str(folder / 'ledger.sqlite3'))}", f"synchronous = {_toml(synchronous)}", ""]
    lines += [
        "[[sources]]",
        'name = "bench"',
        'type = "csv"',
        f"path = {_toml(str(csv_path))}",
        'primary_key = "id"',
        "",
    ]
    lines += ["[sources.mapping]", *(f"{k} = {_toml(v)}" for k, v in MAPPING.items())]
    path = folder / "capture-sync.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass(frozen=True)
class ChildRun:
    exit_code: int
    started_at: float  # time.time() just before the spawn
    wall_s: float
    cpu_s: float  # user + sys of the child alone
    max_rss_mb: float  # the child's peak resident set

    def per_record_us(self, records: int) -> float:
        return self.cpu_s / records * 1e6


def run_child(args: Sequence[str], log: Path, env: dict[str, str] | None = None) -> ChildRun:
    """Run a command to its end; its output goes to `log`, its resource use is its own."""
    with log.open("ab") as out:
        started_at = time.time()
        t0 = time.perf_counter()
        proc = subprocess.Popen(list(args), stdout=out, stderr=out, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall_s = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return ChildRun(
        proc.returncode,
        started_at,
        wall_s,
        usage.ru_utime + usage.ru_stime,
        usage.ru_maxrss / 1024,  # Linux: KiB
    )


def capture_sync(command: str, config: Path, api: Api, log: Path) -> ChildRun:
    """`capture-sync COMMAND -c CONFIG` as a user would run it (JSON logs at INFO to `log`)."""
    run = run_child([str(CLI), command, "-c", str(config)], log, env=api.env())
    if run.exit_code != 0:
        raise RuntimeError(f"capture-sync {command} exited {run.exit_code}; see {log}")
    return run


def delivered(ledger: Path) -> int:
    """Entries the API took (captured, or merged as a duplicate), read straight from the ledger file."""
    with sqlite3.connect(ledger) as db:
        return db.execute("SELECT count(*) FROM entries WHERE state IN ('captured', 'duplicate')").fetchone()[0]


def print_cpu_per_record(title: str, result: dict[str, Any], width: int) -> None:
    """`title`, each of `result["cpu_us_per_record"]` on a line of its own, then `result` as JSON."""
    print(title)
    for name, value in result["cpu_us_per_record"].items():
        print(f"  {name:<{width}} {value:>7.1f} us")
    print(json.dumps(result))
