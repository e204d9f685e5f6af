"""Issue 14 through `capture-sync sync` against the sandbox: a bad record is set aside and the run
goes on (exit 0); a source that fails keeps what it gave and the others are delivered (exit 6); a
source that cannot be read is skipped and named (exit 2); a bad setup sends nothing (exit 2); a stop
says how to continue (exit 4); and the run record holds the code the process returned."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from connector.sandbox import Faults

DEADLINE_S = 30

PLUGIN = '''
from connector.source import Record, Source, SourceOptions


class Flaky(Source):
    """Six good records, then a bug."""

    class Options(SourceOptions):
        pass

    def read(self, state):
        for i in range(state or 0, 6):
            yield Record(id=f"F{i}", data={"First": f"Flo{i}", "Email": f"flo{i}@example.org"}, state=i + 1)
        raise RuntimeError("the export API dropped the connection")


class Unsavable(Source):
    """A cursor that is not JSON: a plugin bug, caught at the boundary."""

    class Options(SourceOptions):
        pass

    def read(self, state):
        yield Record(id="U1", data={"First": "Una", "Email": "una@example.org"}, state=object())
'''


def sync_with_plugin_first(kit, config: Path, env: dict[str, str], cls: str):
    """Sync with a plugin source of PLUGIN read before the config's csv source."""
    block = f'''[[sources]]
name = "{cls.lower()}"
type = "bad_input_plugin:{cls}"

[sources.mapping]
first_name = "First"
email = "Email"

'''
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace("[[sources]]", block + "[[sources]]", 1), encoding="utf-8")
    return kit.run("sync", "-c", str(config), env=env)


def configure(kit, box, tmp_path: Path, contacts: int, **options: str) -> tuple[Path, dict[str, str]]:
    """A config with the csv source `signups` and credentials for `box`; the env finds the plugin module."""
    key, secret = box.create_client(rate_limit=10_000)
    kit.credentials(tmp_path, key, secret)
    path = tmp_path / "contacts.csv"
    kit.contacts(path, [kit.contact(n) for n in range(1, contacts + 1)])
    (tmp_path / "bad_input_plugin.py").write_text(PLUGIN, encoding="utf-8")
    return kit.config(tmp_path, box.base_url, path, **options), kit.env(PYTHONPATH=str(tmp_path))


@pytest.fixture
def setup(kit, sandbox, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    return configure(kit, sandbox, tmp_path, 3)


def emails_in(sandbox) -> set[str]:
    return {p["data"]["email"] for p in sandbox.store.persons()}


def last_run_exit_code(kit, config: Path, env: dict[str, str] | None = None) -> int:
    status = kit.run("status", "-c", str(config), "--json", env=env)
    assert status.code == 0, status.stderr
    return json.loads(status.stdout)["runs"][0]["exit_code"]


def test_a_plugin_that_raises_after_6_records_gets_them_delivered_and_the_other_source_too(kit, sandbox, setup):
    config, env = setup
    result = sync_with_plugin_first(kit, config, env, "Flaky")
    assert result.code == 6, result.stderr
    assert "sources.flaky: the read failed after 6 record(s): RuntimeError: the export API dropped" in result.stderr
    assert "Traceback" not in result.stderr
    assert emails_in(sandbox) == {f"flo{i}@example.org" for i in range(6)} | {
        f"ada{n}@example.org" for n in range(1, 4)
    }
    assert last_run_exit_code(kit, config, env) == 6


def test_a_missing_file_skips_its_source_and_the_others_pending_work_is_delivered(kit, sandbox, setup, tmp_path):
    config, env = setup
    missing = tmp_path / "exports" / "late.csv"
    good = config.read_text(encoding="utf-8")
    block = (
        good[good.index("[[sources]]") :]
        .replace('"signups"', '"late"')
        .replace(json.dumps(str(tmp_path / "contacts.csv")), json.dumps(str(missing)))
    )
    with socket.socket() as probe:  # first an outage: signups' contacts stay pending in the ledger
        probe.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{probe.getsockname()[1]}/api/v1/capture"
    config.write_text(good.replace(json.dumps(sandbox.base_url), json.dumps(down)) + "\n" + block, encoding="utf-8")
    first = kit.run("sync", "-c", str(config), env=env)
    assert first.code == 2 and sandbox.store.persons() == [], first.stderr

    config.write_text(good + "\n" + block, encoding="utf-8")  # the API is back; the file is still missing
    result = kit.run("sync", "-c", str(config), env=env)
    assert result.code == 2, result.stderr
    assert "'late'" in result.stderr and str(missing) in result.stderr
    assert "exit 2: not read: late" in result.stderr
    assert len(sandbox.store.persons()) == 3, "the pending contacts of signups were delivered"
    assert last_run_exit_code(kit, config) == 2


@pytest.mark.parametrize(("kind", "line"), [("csv", "line 4"), ("jsonl", "line 3")])
def test_a_malformed_line_between_good_ones_is_rejected_with_its_line_and_the_run_exits_0(
    kit, sandbox, setup, tmp_path, kind, line
):
    config, env = setup
    path = tmp_path / f"contacts.{kind}"
    if kind == "csv":
        good = (tmp_path / "contacts.csv").read_bytes().splitlines(keepends=True)  # header and 3 contacts
        path.write_bytes(b"".join(good[:3]) + b"R9,Bad\xff\xfeBytes,X,bad@example.org,\r\n" + b"".join(good[3:]))
    else:
        rows = [
            {"id": f"R{n}", "First": f"Ada{n}", "Last": "L", "Email": f"ada{n}@example.org", "Phone": ""}
            for n in (1, 2, 3)
        ]
        lines = [json.dumps(r) for r in rows]
        path.write_text("\n".join([*lines[:2], '{"id": "R9", "First": "Bro', lines[2]]) + "\n", encoding="utf-8")
        config.write_text(
            config.read_text(encoding="utf-8").replace('type = "csv"', 'type = "jsonl"'), encoding="utf-8"
        )
    config.write_text(
        config.read_text(encoding="utf-8").replace(json.dumps(str(tmp_path / "contacts.csv")), json.dumps(str(path))),
        encoding="utf-8",
    )
    result = kit.run("sync", "-c", str(config), env=env)
    assert result.code == 0, result.stderr
    assert emails_in(sandbox) == {f"ada{n}@example.org" for n in (1, 2, 3)}
    assert f"1 record(s) rejected, never sent: capture-sync ledger list -c {config} --state rejected" in result.stdout
    listed = kit.run("ledger", "list", "-c", str(config), "--state", "rejected", "--json")
    assert listed.code == 0, listed.stderr
    [entry] = [json.loads(row) for row in listed.stdout.splitlines()]
    assert line in (entry["last_error"] or ""), entry
    assert last_run_exit_code(kit, config) == 0


def test_a_mapped_column_the_file_lacks_stops_sync_and_dry_run_before_anything_is_read(kit, sandbox, setup, tmp_path):
    config, env = setup
    contacts = tmp_path / "contacts.csv"
    contacts.write_text(contacts.read_text(encoding="utf-8").replace(",Email,", ",E-mail,", 1), encoding="utf-8")
    for dry_run in ([], ["--dry-run"]):
        result = kit.run("sync", "-c", str(config), *dry_run, env=env)
        assert result.code == 2, result.stderr
        assert "sources.signups.mapping.email" in result.stderr and "'E-mail'" in result.stderr
    assert sandbox.store.persons() == []
    status = json.loads(kit.run("status", "-c", str(config), "--json").stdout)
    assert sum(status["by_state"].values()) == 0, "nothing was read"
    assert status["runs"][0]["exit_code"] == 2


def test_a_state_json_cannot_hold_is_a_plugin_error_in_the_run_record_too(kit, sandbox, setup):
    """It used to be an unexpected TypeError (exit 1) when the chunk was committed, losing the chunk
    (issue 22); an unexpected error's exit 1 in the run record is tests/delivery/test_bad_input_pass.py's."""
    result = sync_with_plugin_first(kit, *setup, "Unsavable")
    assert result.code == 6, result.stderr
    assert "sources.unsavable: the read failed after 0 record(s): item 1 of the read, id 'U1'" in result.stderr
    assert "which JSON cannot hold" in result.stderr and "Traceback" not in result.stderr
    assert emails_in(sandbox) == {f"ada{n}@example.org" for n in (1, 2, 3)}  # the other source, delivered
    assert last_run_exit_code(kit, *setup) == 6


def test_a_stop_says_how_to_continue_and_is_exit_4_in_the_run_record_too(kit, sandbox_factory, tmp_path):
    box = sandbox_factory(faults=Faults(latency_s=0.7))
    config, env = configure(kit, box, tmp_path, 40, extra_capture="concurrency = 1\n")
    proc = subprocess.Popen(
        [str(kit.script), "sync", "-c", str(config)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not box.store.captures():  # mid-delivery: the first batch has reached the CRM
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 4, stderr
    assert "exit 4: stopped; run sync again to continue" in stderr
    assert "unavailable" not in stdout + stderr
    assert last_run_exit_code(kit, config) == 4
