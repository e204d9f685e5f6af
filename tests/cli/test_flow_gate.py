"""`sync`, `replay` and `run` against a base URL where no synthetic test flow has passed (spec 1:
"production should be used only after a synthetic test flow works"): a warning once, or, with
`capture.require_flow = true`, a refusal before any source is read."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

REQUIRE = "require_flow = true\n"


def setup(kit, sandbox, tmp_path: Path, extra_capture: str = "") -> Path:
    key, secret = sandbox.create_client("gate-test")
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(n) for n in range(3)])
    return kit.config(tmp_path, sandbox.base_url, contacts, extra_capture=extra_capture)


def entries(tmp_path: Path) -> int:
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as db:
        return db.execute("SELECT COUNT(*) FROM entries").fetchone()[0]


def test_sync_without_a_passed_flow_warns_once_and_delivers(kit, sandbox, tmp_path: Path) -> None:
    config = setup(kit, sandbox, tmp_path)
    result = kit.run("sync", "-c", str(config))
    assert result.code == 0, result.stderr
    assert result.stderr.count("flow.not_passed") == 1
    assert f"capture-sync check -c {config} --flow" in result.stderr
    assert len(sandbox.store.persons()) == 3


def test_required_flow_refuses_sync_replay_and_run_before_reading_anything(kit, sandbox, tmp_path: Path) -> None:
    config = setup(kit, sandbox, tmp_path, extra_capture=REQUIRE)
    for command in ("sync", "replay", "run"):
        result = kit.run(command, "-c", str(config))
        assert result.code == 2, (command, result.stderr)
        assert "capture.require_flow" in result.stderr and "--flow" in result.stderr
    assert entries(tmp_path) == 0
    assert sandbox.store.persons() == []
    runs = kit.run("runs", "list", "-c", str(config), "--json")
    assert [(r["kind"], r["exit_code"]) for r in json.loads(runs.stdout)["runs"]] == [("replay", 2), ("sync", 2)]


def test_required_flow_refuses_even_when_the_api_does_not_answer(kit, sandbox, tmp_path: Path) -> None:
    key, secret = sandbox.create_client("gate-test")
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1)])
    closed = "http://127.0.0.1:9/api/v1/capture"  # nothing listens: the gate must not depend on GET /info
    config = kit.config(tmp_path, closed, contacts, extra_capture=REQUIRE)
    result = kit.run("sync", "-c", str(config))
    assert result.code == 2, result.stderr
    assert "capture.require_flow" in result.stderr
    assert not (tmp_path / "ledger.sqlite3").exists() or entries(tmp_path) == 0


def test_after_a_passed_flow_a_required_flow_lets_sync_deliver_without_a_warning(kit, sandbox, tmp_path: Path) -> None:
    config = setup(kit, sandbox, tmp_path, extra_capture=REQUIRE)
    flow = kit.run("check", "-c", str(config), "--flow", "--yes")
    assert flow.code == 0, flow.stdout + flow.stderr
    synthetic = len(sandbox.store.persons())

    result = kit.run("sync", "-c", str(config))

    assert result.code == 0, result.stderr
    assert "flow.not_passed" not in result.stderr
    assert len(sandbox.store.persons()) == synthetic + 3
