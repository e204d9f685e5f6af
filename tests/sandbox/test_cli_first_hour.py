"""`sandbox serve` and `sandbox create-client` as a new user meets them (issue 17, the first hour):
a fixed default port, a first line saying where it listens, credentials written to 0600 files."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from connector.cli import app
from connector.sandbox import SandboxStore
from connector.sandbox.process import LISTENING, base_url_of

runner = CliRunner()


def sandbox(*args: str):
    return runner.invoke(app, ["sandbox", *args])


def clients(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT count(*) FROM clients").fetchone()[0]


def test_serve_listens_on_8765_unless_told_and_its_help_shows_an_example():
    result = sandbox("serve", "--help")
    assert result.exit_code == 0
    assert "[default: 8765]" in result.output
    assert "Example: capture-sync sandbox serve --port 8765 --db sandbox.sqlite3" in result.output


def test_serve_says_in_one_line_where_it_listens(tmp_path, sandbox_process):
    server = sandbox_process(db=tmp_path / "box.sqlite3")
    # spawn_sandbox read the first line; the same line parses back to the same URL
    assert base_url_of(f"{LISTENING} {server.base_url}\n") == server.base_url
    assert server.base_url == f"http://127.0.0.1:{server.port}/api/v1/capture"
    assert base_url_of("http://127.0.0.1:1/api/v1/capture") is None  # the old bare line is not taken for it


@pytest.fixture
def umask_0():
    old = os.umask(0)  # the most permissive umask: the files must still be 0600
    yield
    os.umask(old)


def test_write_credentials_makes_0600_files_and_prints_only_the_config_lines(tmp_path, umask_0):
    db, folder = tmp_path / "box.sqlite3", tmp_path / "creds"
    result = sandbox("create-client", "--db", str(db), "--name", "shop", "--write-credentials", str(folder))
    assert result.exit_code == 0, result.output
    lines = tomllib.loads(result.stdout)
    key_file, secret_file = Path(lines["api_key_file"]), Path(lines["api_secret_file"])
    assert (key_file, secret_file) == (folder / "api_key", folder / "api_secret")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for path in (key_file, secret_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    secret = secret_file.read_text().strip()
    assert secret not in result.stdout and secret not in result.stderr
    assert "mode 0600" in result.stderr
    with SandboxStore(db) as store:
        assert store.authenticate(key_file.read_text().strip(), secret).name == "shop"


def test_existing_credential_files_are_refused_before_a_client_is_made_unless_force(tmp_path):
    db, folder = tmp_path / "box.sqlite3", tmp_path / "creds"
    assert sandbox("create-client", "--db", str(db), "--name", "a", "--write-credentials", str(folder)).exit_code == 0
    first = (folder / "api_secret").read_text()

    refused = sandbox("create-client", "--db", str(db), "--name", "b", "--write-credentials", str(folder))
    assert refused.exit_code == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "already exist" in refused.stderr and "--force" in refused.stderr
    assert (folder / "api_secret").read_text() == first and clients(db) == 1

    forced = sandbox("create-client", "--db", str(db), "--name", "b", "--write-credentials", str(folder), "--force")
    assert forced.exit_code == 0, forced.output
    assert stat.S_IMODE((folder / "api_secret").stat().st_mode) == 0o600
    assert not list(folder.glob(".*tmp"))  # the replacement went through a temporary file, renamed
    with SandboxStore(db) as store:
        client = store.authenticate(
            (folder / "api_key").read_text().strip(), (folder / "api_secret").read_text().strip()
        )
    assert client is not None and client.name == "b"


@pytest.mark.parametrize(
    "command",
    [
        ["create-client", "--name", "x"],
        ["regenerate-secret", "ck_x"],
        ["set-active", "ck_x", "--active"],
    ],
)
def test_client_commands_on_a_db_they_cannot_open_are_one_line_and_exit_2(tmp_path, command):
    db = tmp_path / "missing" / "box.sqlite3"
    result = sandbox(*command, "--db", str(db))
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("error: ")
    assert f"sandbox database {db} cannot be opened for writing" in result.stderr and "--db" in result.stderr
    assert "Traceback" not in result.output


def test_a_read_only_db_is_one_line_too(tmp_path):
    db = tmp_path / "box.sqlite3"
    json.loads(runner.invoke(app, ["sandbox", "create-client", "--db", str(db), "--name", "x"]).stdout)
    db.chmod(0o400)
    # root ignores file modes: drop the capabilities that let it (as the storage-fault tests do)
    cmd = [
        str(Path(sys.executable).with_name("capture-sync")),
        "sandbox",
        "create-client",
        "--db",
        str(db),
        "--name",
        "y",
    ]
    if os.geteuid() == 0:
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]
        if not shutil.which("setpriv") or subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
            pytest.skip("running as root, and setpriv cannot drop the capabilities that let root ignore file modes")
        cmd = [*prefix, *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "cannot be opened for writing" in done.stderr
