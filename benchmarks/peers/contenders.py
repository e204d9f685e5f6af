"""The four contenders of the peers benchmark, each as the command line(s) that run it and the
environment they get. Every contender reads the same CSV and talks to the same sandbox; nothing
here measures, so the commands can be read as what a user of each tool would run."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# isort: off
from measure import Api  # first: it puts benchmarks/ on the path, for the harness
from harness import CLI, write_config
# isort: on

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Job:
    folder: Path  # this run's own folder (ledger, pipeline state, configs, log)
    csv_path: Path
    api: Api
    peers_python: Path  # the interpreter of .venv-peers
    rate_window_s: float | None  # what capture-sync is told of the window; None: left unset

    def env(self, **extra: str) -> dict[str, str]:
        # dlt would send telemetry; the benchmark talks to 127.0.0.1 only
        return {**self.api.env(), "RUNTIME__DLTHUB_TELEMETRY": "false", **extra}


Commands = tuple[list[list[str]], dict[str, str]]


def capture_sync(job: Job) -> Commands:
    """`capture-sync sync` on the harness's config: batches of 100, 4 in flight, ledger FULL."""
    config = write_config(job.folder, job.api, job.csv_path, rate_window_s=job.rate_window_s or 60.0)
    if job.rate_window_s is None:
        text = config.read_text().splitlines()
        config.write_text("\n".join(line for line in text if not line.startswith("rate_window_s")) + "\n")
    return [[str(CLI), "sync", "-c", str(config)]], job.env()


def dlt_peer(job: Job) -> Commands:
    env = job.env(
        DESTINATION__CAPTURE__BASE_URL=job.api.base_url,
        DESTINATION__CAPTURE__API_KEY=job.api.api_key,
        DESTINATION__CAPTURE__API_SECRET=job.api.api_secret,
    )
    script = HERE / "dlt_pipeline.py"
    return [[str(job.peers_python), str(script), str(job.csv_path), str(job.folder / "dlt-pipelines")]], env


def singer_peer(job: Job) -> Commands:
    tap_config, target_config = job.folder / "tap.json", job.folder / "target.json"
    tap_config.write_text(json.dumps({"path": str(job.csv_path)}))
    target_config.write_text(
        json.dumps(
            {
                "base_url": job.api.base_url,
                "api_key": job.api.api_key,
                "api_secret": job.api.api_secret,
                "batch_size_rows": 100,
            }
        )
    )
    python = str(job.peers_python)
    return [
        [python, str(HERE / "singer_tap.py"), "--config", str(tap_config)],
        [python, str(HERE / "singer_target.py"), "--config", str(target_config)],
    ], job.env()


def httpx_peer(job: Job) -> Commands:
    return [[str(job.peers_python), str(HERE / "httpx_loop.py"), str(job.csv_path), job.api.base_url]], job.env()


CONTENDERS: dict[str, Callable[[Job], Commands]] = {
    "capture-sync": capture_sync,
    "dlt": dlt_peer,
    "singer-sdk": singer_peer,
    "httpx": httpx_peer,
}
