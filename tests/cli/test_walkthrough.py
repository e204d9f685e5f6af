"""The README's walkthrough "From the sandbox to production" is examples/walkthrough.sh verbatim,
and that script, run from a clean folder against its own sandbox, does what the README says at
each step: 0600 credential files, a passing check and synthetic flow, a dry run that sends
nothing, a sync that captures the CSV's contacts, and a sandbox that still holds them (and the
client) after a restart on the same database."""

from __future__ import annotations

import csv
import os
import re
import socket
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

from connector.ledger import Ledger
from connector.sandbox import SandboxStore

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "walkthrough.sh"
README = ROOT / "README.md"
MARKER = "<!-- examples/walkthrough.sh, verbatim (tests/cli/test_walkthrough.py checks it) -->"


def readme_block() -> str:
    """The fenced block right after the marker line."""
    text = README.read_text(encoding="utf-8")
    assert MARKER in text, "the README lost the walkthrough's marker"
    match = re.match(r"\s*```sh\n(.*?\n)```\n", text.split(MARKER, 1)[1], re.DOTALL)
    assert match, "no ```sh block after the walkthrough's marker"
    return match.group(1)


def test_the_readme_walkthrough_is_the_script_byte_for_byte():
    assert readme_block() == SCRIPT.read_text(encoding="utf-8")
    assert os.access(SCRIPT, os.X_OK)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_walkthrough_runs_from_a_clean_folder_and_each_step_does_what_it_says(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAPTURE_")}
    env.update(PORT=str(free_port()), PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    done = subprocess.run(
        ["bash", str(SCRIPT)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    folder = tmp_path / "capture-sync-walkthrough"

    # 1, 8: the sandbox said where it listens, on the port asked for, both times it started
    url = f"http://127.0.0.1:{env['PORT']}/api/v1/capture"
    assert done.stdout.count(f"sandbox Capture API listening on {url}") == 2

    # 2: the credentials are in 0600 files, the printed lines name them, the secret is not printed
    key_file, secret_file = folder / "credentials" / "api_key", folder / "credentials" / "api_secret"
    for path in (key_file, secret_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert f'= "{path}"' in done.stdout
    secret = secret_file.read_text().strip()
    assert secret not in done.stdout and secret not in done.stderr

    # 6, 7: the dry run sent nothing (every capture the sandbox holds came after the sync started),
    # the sync captured every contact of the CSV once, and the ledger agrees
    assert "Dry run: nothing was sent" in done.stdout
    emails = {row["E-mail"].strip().lower() for row in csv.DictReader((folder / "contacts.csv").open())}
    with sqlite3.connect(folder / "ledger.sqlite3") as ledger:
        runs = ledger.execute(
            "SELECT kind, started_at, read, sent, captured, exit_code FROM runs ORDER BY id"
        ).fetchall()
        states = dict(ledger.execute("SELECT state, count(*) FROM entries GROUP BY state").fetchall())
    assert [(kind, read, sent, captured, code) for kind, _, read, sent, captured, code in runs] == [
        ("sync", 3, 3, 3, 0),  # 7: the sync
        ("sync", 0, 0, 0, 0),  # 8: after the restart, nothing new and nothing sent again
    ]
    assert states == {"captured": 3}

    # 5: the synthetic flow passed and its pass is in the ledger, for this base URL and client
    with Ledger(folder / "ledger.sqlite3") as flows:
        assert flows.flow_passed(url, "flow test") is not None  # the disposable test client ran it
        assert flows.flow_passed(url, "my integration") is None

    # 8: the restarted sandbox's database still holds the client and the persons
    api_key = key_file.read_text().strip()
    with SandboxStore(folder / "sandbox.sqlite3") as store:
        client = store.authenticate(api_key, secret)
        # the contacts' captures (the flow's synthetic test persons have addresses of their own)
        captures = [c for c in store.captures() if c["client"] == api_key and c["data"]["email"] in emails]
        persons = {p["data"].get("email") for p in store.persons()}
    assert client is not None and client.name == "my integration"
    assert sorted(c["data"]["email"] for c in captures) == sorted(emails) and len(emails) == 3  # each once
    assert all(c["at"] >= runs[0][1] for c in captures)  # 6: none during the dry run
    assert emails <= persons


def test_the_production_capture_table_is_a_valid_config_with_the_walkthrough_sources(tmp_path):
    """The README's production `[capture]` table loads with the walkthrough's sources in place of
    the sandbox's, credential files of mode 0600 at its paths (moved into tmp_path here)."""
    from connector.config import load_config

    text = README.read_text(encoding="utf-8").split("**Then production.**", 1)[1]
    capture = re.search(r"```toml\n(.*?)```", text, re.DOTALL).group(1)
    for name in ("api_key", "api_secret"):
        (tmp_path / name).write_text(f"{name}-value\n")
        (tmp_path / name).chmod(0o600)
        capture = capture.replace(f"/etc/capture-sync/{name}", str(tmp_path / name))
    script = SCRIPT.read_text(encoding="utf-8")
    sources = script[script.index("[ledger]") : script.index("EOF\n\n# 4.")]
    (tmp_path / "contacts.csv").write_text("id,First name,Last name,E-mail,Phone\n")
    config = tmp_path / "capture-sync.toml"
    config.write_text(capture + "\n" + sources)
    cfg = load_config(config)
    assert cfg.capture.require_flow is True
    assert cfg.base_url.startswith("https://")


def test_the_walkthrough_stops_at_once_when_its_port_is_taken(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAPTURE_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    with socket.create_server(("127.0.0.1", 0)) as taken:
        env["PORT"] = str(taken.getsockname()[1])
        done = subprocess.run(["bash", str(SCRIPT)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert f"cannot listen on 127.0.0.1:{env['PORT']}" in done.stderr and "--port" in done.stderr
    assert not (tmp_path / "capture-sync-walkthrough" / "credentials").exists()  # nothing after step 1 ran
