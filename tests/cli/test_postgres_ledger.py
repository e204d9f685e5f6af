"""The commands on a PostgreSQL ledger (`[ledger] url`), end to end over the sandbox: they behave as on
SQLite, the password is never in the URL or in anything printed, and an unreachable database ends
a `sync` with exit 4 and one line naming it."""

from __future__ import annotations

import json
import socket
from pathlib import Path

PASSWORD = "pw-never-printed-7f3a"


def use_postgres(config: Path, url: str, *, extra: str = "") -> None:
    text = config.read_text(encoding="utf-8")
    config.write_text(
        text.replace('[ledger]\npath = "ledger.sqlite3"\n', f"[ledger]\nurl = {json.dumps(url)}\n{extra}")
    )


def test_sync_replay_status_runs_and_ledger_work_on_postgresql(
    kit, sandbox, tmp_path: Path, postgres_ledger_url: str
) -> None:
    key, secret = sandbox.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(n) for n in range(1, 26)] + [kit.contact(26, Email="bad@@example.org")])
    config = kit.config(tmp_path, sandbox.base_url, contacts)
    use_postgres(config, postgres_ledger_url)
    env = kit.env(PGPASSWORD=PASSWORD)  # trust auth ignores it: it must still never be printed

    done = kit.run("sync", "-c", str(config), env=env)
    assert done.code == 0, done.stderr
    assert len(sandbox.store.persons()) == 25
    assert not (tmp_path / "ledger.sqlite3").exists()

    again = kit.run("replay", "-c", str(config), env=env)
    assert again.code == 0, again.stderr
    kit.contacts(contacts, [kit.contact(27)], header=False)
    more = kit.run("sync", "-c", str(config), env=env)
    assert more.code == 0, more.stderr
    assert len(sandbox.store.persons()) == 26, "only the new row is sent"

    status = kit.run("status", "-c", str(config), "--json", env=env)
    assert status.code == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["by_state"]["captured"] == 26 and report["by_state"]["rejected"] == 1
    runs = kit.run("runs", "list", "-c", str(config), "--json", env=env)
    assert runs.code == 0, runs.stderr
    assert [r["kind"] for r in json.loads(runs.stdout)["runs"]][:3] == ["sync", "replay", "sync"]
    rejected = kit.run("ledger", "list", "-c", str(config), "--state", "rejected", "--json", env=env)
    [entry] = [json.loads(line) for line in rejected.stdout.splitlines()]
    assert entry["record_id"] == "R26"
    for result in (done, again, more, status, runs, rejected):
        assert PASSWORD not in result.stdout + result.stderr


def test_a_url_with_a_password_is_refused_and_never_echoed(kit, sandbox, tmp_path: Path) -> None:
    key, secret = sandbox.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1)])
    config = kit.config(tmp_path, sandbox.base_url, contacts)
    use_postgres(config, f"postgresql://capture:{PASSWORD}@127.0.0.1:5432/capture")
    for args in (["sync"], ["status"], ["check"]):
        result = kit.run(*args, "-c", str(config))
        assert result.code == 2, result.stderr
        assert "ledger.url: carries a password" in result.stderr and "PGPASSWORD" in result.stderr
        assert PASSWORD not in result.stdout + result.stderr
    use_postgres(kit.config(tmp_path, sandbox.base_url, contacts), "postgresql://capture@127.0.0.1:5432/capture")
    by_env = kit.run(
        "sync",
        "-c",
        str(config),
        env=kit.env(CAPTURE_SYNC__LEDGER__URL=f"postgresql://capture@127.0.0.1/capture?password={PASSWORD}"),
    )
    assert by_env.code == 2 and "carries a password" in by_env.stderr and PASSWORD not in by_env.stderr


def test_an_unreachable_database_ends_sync_with_exit_4_and_one_line_naming_it(kit, sandbox, tmp_path: Path) -> None:
    key, secret = sandbox.create_client(rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1)])
    config = kit.config(tmp_path, sandbox.base_url, contacts)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "pgpass").write_text(PASSWORD + "\n")
    use_postgres(config, f"postgresql://capture@127.0.0.1:{port}/crm_ledger", extra='password_file = "pgpass"\n')

    result = kit.run("sync", "-c", str(config))
    assert result.code == 4, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"@127.0.0.1:{port}/crm_ledger cannot be reached" in lines[0]  # the user is masked like any URL userinfo
    assert PASSWORD not in result.stdout + result.stderr
    assert sandbox.store.persons() == []
