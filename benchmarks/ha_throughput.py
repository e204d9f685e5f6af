"""Throughput of several integrations on several daemons (issue 23): four integrations, each its
own API client with its own rate limit in one sandbox child, on one throwaway PostgreSQL ledger,
run by two `run --configs DIR` daemons (which spread the four leases between them). The figure is
the total persons/s from the first Capture request to the last person captured, against the sum
of the four clients' rate ceilings (rate_limit requests per window x batch_size persons each).

    .venv/bin/python benchmarks/ha_throughput.py [--rows 3000]      (also in `make bench`)
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import harness
import pg_server
import psycopg
from csv_read import generate

from connector.sandbox import SandboxStore, spawn_sandbox

INTEGRATIONS = 4
DAEMONS = 2
RATE_LIMIT = 4  # requests per window, per API client
WINDOW_S = 1.0
# Long enough that the first reads of four integrations on two busy cores do not cost a lease; a
# batch a lost lease left open goes to the retry sweep (every 2 s here).
LEASE_S = 10.0
BATCH = 50  # persons per request: a client's ceiling is RATE_LIMIT / WINDOW_S * BATCH persons/s


def _one(url: str, schema: str, sql: str) -> Any:
    with psycopg.connect(url, autocommit=True, options=f'-c search_path="{schema}"') as conn:
        try:
            return conn.execute(sql).fetchone()[0]  # type: ignore[index]
        except psycopg.errors.UndefinedTable:  # no daemon has opened this ledger yet
            return None


def _config(folder: Path, name: str, base_url: str, url: str, key: str, secret: str, csv_path: Path) -> None:
    """One integration's config in the shared folder; its credentials in files of its own."""
    for part, value in (("key", key), ("secret", secret)):
        (folder / f"{name}.api_{part}").write_text(value + "\n")
        (folder / f"{name}.api_{part}").chmod(0o600)
    mapping = harness.write_config(folder, harness.Api(base_url, key, secret, folder), csv_path).read_text()
    mapping = mapping[mapping.index("[[sources]]") :].replace(
        'primary_key = "id"\n', 'primary_key = "id"\nschedule = "every 1s"\n'
    )
    (folder / "capture-sync.toml").unlink()
    (folder / f"{name}.toml").write_text(
        f'[integration]\nname = "{name}"\n\n[daemon]\nlease_s = {LEASE_S:g}\nretry_sweep = "every 2s"\n\n'
        f"[capture]\nbase_url = {json.dumps(base_url)}\nbatch_size = {BATCH}\nconcurrency = 2\n"
        f'rate_window_s = {WINDOW_S}\napi_key_file = "{name}.api_key"\napi_secret_file = "{name}.api_secret"\n\n'
        f"[ledger]\nurl = {json.dumps(url)}\n\n{mapping}"
    )


def run(rows: int = 3000) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, pg_server.required_database(durable=True) as url:
        folder, configs = Path(tmp), Path(tmp) / "integrations.d"
        configs.mkdir()
        db = folder / "sandbox.sqlite3"
        names = [f"crm-{n}" for n in range(INTEGRATIONS)]
        with SandboxStore(db) as store:
            clients = [store.create_client(name, rate_limit=RATE_LIMIT) for name in names]
        api = spawn_sandbox(db, folder / "sandbox.log", rate_window=WINDOW_S)
        daemons: list[subprocess.Popen[bytes]] = []
        try:
            for name, (key, secret) in zip(names, clients, strict=True):
                csv_path = folder / f"{name}.csv"
                generate(csv_path, rows, messy=False)
                csv_path.write_text(csv_path.read_text().replace("@example.com", f"@{name}.example.com"))
                _config(configs, name, api.base_url, url, key, secret, csv_path)
            for n in range(DAEMONS):
                log = (folder / f"daemon-{n}.log").open("wb")
                daemons.append(
                    subprocess.Popen([str(harness.CLI), "run", "--configs", str(configs)], stdout=log, stderr=log)
                )
            total = rows * INTEGRATIONS
            deadline = time.monotonic() + max(120.0, 4 * total / (INTEGRATIONS * RATE_LIMIT / WINDOW_S * BATCH))
            captured = 0
            while captured < total:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{captured} of {total} persons captured before the deadline; logs in {folder}")
                time.sleep(0.1)
                captured = sum(
                    _one(url, n, "SELECT count(*) FROM entries WHERE state = 'captured'") or 0 for n in names
                )
            done_at = time.time()
            first = min(_one(url, n, "SELECT min(started_at) FROM attempts") for n in names)
            leaders = {
                n: _one(url, n, f"SELECT holder FROM capture_sync_ha.leases WHERE integration = '{n}'") for n in names
            }
        finally:
            for proc in daemons:
                proc.send_signal(signal.SIGTERM)
            for proc in daemons:
                proc.wait(timeout=20)
            api.stop()
    ceiling = INTEGRATIONS * RATE_LIMIT / WINDOW_S * BATCH
    persons_per_s = total / (done_at - first)
    return {
        "integrations": INTEGRATIONS,
        "daemons": DAEMONS,
        "rows_each": rows,
        "persons": total,
        "seconds": round(done_at - first, 2),
        "persons_per_s": round(persons_per_s, 1),
        "ceiling_persons_per_s": ceiling,
        "ratio": round(persons_per_s / ceiling, 3),
        "leaders_at_end": len(set(leaders.values())),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3000, help="rows per integration")
    r = run(parser.parse_args().rows)
    print(
        f"{r['integrations']} integrations on {r['daemons']} daemons: {r['persons']:,} persons in {r['seconds']:.1f} s = "
        f"{r['persons_per_s']:,.0f} persons/s against the sum of their ceilings {r['ceiling_persons_per_s']:,.0f} "
        f"({r['ratio']:.2f}); {r['leaders_at_end']} daemon(s) leading at the end"
    )


if __name__ == "__main__":
    main()
