"""Running the installed `capture-sync` console script, and writing the configs the tests use."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(sys.executable).with_name("capture-sync")
CLI_TIMEOUT_S = 60


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


def clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without any CAPTURE_* variable a developer might have set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAPTURE_")}
    env.update(extra)
    return env


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Result:
    proc = subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env or clean_env(),
        timeout=CLI_TIMEOUT_S,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


CONTACT_FIELDS = ["id", "First", "Last", "Email", "Phone"]


def write_contacts(path: Path, rows: list[dict[str, str]], *, header: bool = True) -> None:
    with path.open("a" if not header else "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CONTACT_FIELDS)
        if header:
            writer.writeheader()
        writer.writerows(rows)


def contact(n: int, **over: str) -> dict[str, str]:
    row = {"id": f"R{n}", "First": f"Ada{n}", "Last": "Lovelace", "Email": f"ada{n}@example.org", "Phone": ""}
    row.update(over)
    return row


def write_config(
    folder: Path,
    base_url: str,
    csv_path: Path,
    *,
    schedule: str = "every 5m",
    secret_files: bool = True,
    extra_capture: str = "",
) -> Path:
    """A config with one csv source; credentials in files beside it (folder/api_key, folder/api_secret)."""
    creds = 'api_key_file = "api_key"\napi_secret_file = "api_secret"\n' if secret_files else ""
    path = folder / "capture-sync.toml"
    path.write_text(
        f"""[capture]
base_url = {json.dumps(base_url)}
{creds}batch_size = 10
{extra_capture}
[capture.retry]
max_attempts = 2
initial_backoff_s = 0.05
max_backoff_s = 0.2

[ledger]
path = "ledger.sqlite3"

[[sources]]
name = "signups"
type = "csv"
schedule = {json.dumps(schedule)}
path = {json.dumps(str(csv_path))}
primary_key = "id"

[sources.mapping]
first_name = "First"
last_name = "Last"
email = "Email"
phone = "Phone"
""",
        encoding="utf-8",
    )
    return path


def write_credentials(folder: Path, api_key: str, api_secret: str) -> None:
    for name, value in (("api_key", api_key), ("api_secret", api_secret)):
        (folder / name).write_text(value + "\n")
        (folder / name).chmod(0o600)


def write_integration(sandbox: Any, root: Path, name: str, rows: list[dict[str, str]], schedule: str) -> Path:
    """`root/name/`: an integration of its own, with its own API client's credentials, a CSV of `rows`
    and a config for it (SQLite ledger in the folder); the config's path."""
    folder = root / name
    folder.mkdir()
    key, secret = sandbox.create_client(name, rate_limit=100_000)
    write_credentials(folder, key, secret)
    contacts = folder / "contacts.csv"
    write_contacts(contacts, rows)
    return write_config(folder, sandbox.base_url, contacts, schedule=schedule)


@dataclass(frozen=True)
class CliKit:
    """The helpers above, handed to tests as one fixture (test modules do not import conftest)."""

    script = SCRIPT
    run = staticmethod(cli)
    env = staticmethod(clean_env)
    config = staticmethod(write_config)
    credentials = staticmethod(write_credentials)
    contacts = staticmethod(write_contacts)
    integration = staticmethod(write_integration)
    contact = staticmethod(contact)


@pytest.fixture
def kit() -> CliKit:
    assert SCRIPT.exists(), f"the console script {SCRIPT} is not installed: run `pip install -e .`"
    return CliKit()
