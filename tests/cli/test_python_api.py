"""The Python API (`from connector import sync, replay, status`) against the sandbox on loopback:
typed reports, the CLI's exit codes as exceptions, and the host's logging left alone."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

import connector
from connector import AuthenticationFailed, ConfigError, ExitCode, NeedsAttention, Unsettled, replay, status, sync
from connector.sandbox import Faults

SAMPLE = Path(__file__).resolve().parents[2] / "connector" / "cli" / "sample-contacts.csv"


def _setup(kit, box, folder: Path, csv: Path = SAMPLE) -> Path:
    key, secret = box.create_client("api-test", rate_limit=100_000)
    kit.credentials(folder, key, secret)
    return kit.config(folder, box.base_url, csv)


def test_a_sync_of_the_sample_contacts_from_python_captures_them_and_a_second_one_sends_nothing(
    kit, sandbox_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CAPTURE_API_KEY", raising=False)
    box = sandbox_factory()
    config = _setup(kit, box, tmp_path)
    handlers = list(logging.getLogger().handlers)

    report = sync(config)

    rows = len(SAMPLE.read_text().splitlines()) - 1
    assert isinstance(report, connector.RunReport) and report.exit_code is ExitCode.OK
    assert report.read == rows and report.captured + report.duplicate + report.rejected == rows
    assert report.captured > 0 and report.unsettled == 0
    assert len(box.store.persons()) == report.captured - report.merged  # the sample holds people twice
    assert logging.getLogger().handlers == handlers, "the API added a logging handler"
    assert capsys.readouterr().out == "", "the API printed on stdout"

    again = sync(str(config), sources="signups", full_refresh=True)  # read again from the start
    assert again.read == rows and again.sent == 0 and again.captured == 0
    assert len(box.store.persons()) == report.captured - report.merged  # nothing sent twice

    now = status(config)
    assert isinstance(now, connector.StatusReport) and now.settled
    assert now.by_state["captured"] == report.captured and now.runs[0].kind == "sync"
    assert now.advice and all(line.text for line in now.advice)  # one line per state that holds
    assert replay(config).sent == 0


def test_a_dry_run_from_python_previews_every_record_and_sends_and_changes_nothing(
    kit, sandbox_factory, tmp_path: Path
) -> None:
    box = sandbox_factory()
    config = _setup(kit, box, tmp_path)
    lines: list[dict[str, object]] = []

    preview = sync(config, dry_run=True, on_preview=lines.append)

    rows = len(SAMPLE.read_text().splitlines()) - 1
    assert preview.kind == "dry_run" and preview.exit_code is ExitCode.OK
    assert preview.read == rows and preview.enqueued + preview.rejected == rows and preview.rejected > 0
    assert box.store.persons() == [] and preview.sent == 0
    to_send = [line for line in lines if line["outcome"] == "send"]
    refused = [line for line in lines if line["outcome"] == "rejected"]
    assert len(to_send) == preview.enqueued and len(refused) == preview.rejected
    assert all(line["reasons"] for line in refused)  # each rejection says why
    shown = preview.dry_run_preview or []
    assert shown and shown == [{k: v for k, v in line.items() if k != "outcome"} for line in to_send[: len(shown)]]
    with pytest.raises(ConfigError, match="dry_run"):
        sync(config, on_preview=lines.append)  # a sink for a real run would be silently unused

    real = sync(config)  # the preview changed nothing: the real run reads and sends every record
    assert real.read == rows and real.captured + real.duplicate == preview.enqueued
    assert real.rejected == preview.rejected and box.store.persons()


def test_refused_credentials_raise_authentication_failed_with_the_report_and_no_secret(
    kit, sandbox_factory, tmp_path: Path
) -> None:
    box = sandbox_factory()
    config = _setup(kit, box, tmp_path)
    secret = "wrong-secret-4f8a1c"
    (tmp_path / "api_secret").write_text(secret + "\n")

    with pytest.raises(AuthenticationFailed) as refused:
        sync(config)

    assert refused.value.exit_code is ExitCode.AUTH == 3
    assert refused.value.report is not None and refused.value.report.auth_failed
    assert "api_secret" in str(refused.value) and secret not in str(refused.value)
    assert box.store.persons() == []
    unchecked = sync(config, check=False)  # check=False: the report, whatever its code
    assert unchecked.exit_code is ExitCode.AUTH and unchecked.captured == 0


def test_an_outage_raises_unsettled_and_replay_settles_it(kit, sandbox_factory, tmp_path: Path) -> None:
    faults = Faults(p_retryable_503=1.0)
    box = sandbox_factory(faults=faults)
    csv = tmp_path / "contacts.csv"
    kit.contacts(csv, [kit.contact(n) for n in range(1, 6)])
    config = _setup(kit, box, tmp_path, csv)

    with pytest.raises(Unsettled) as outage:
        sync(config)
    assert outage.value.exit_code == 4 and outage.value.report is not None and outage.value.report.unsettled == 5
    assert "replay" in str(outage.value)

    faults.p_retryable_503 = 0.0
    assert replay(config).captured == 5
    assert status(config).settled


def test_a_config_problem_is_a_config_error_naming_each_problem(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[capture]\nbatch_size = 500\n[ledger]\npath = "l.sqlite3"\n')
    with pytest.raises(ConfigError) as bad:
        sync(config)
    assert bad.value.exit_code == 2 and bad.value.report is None
    assert any("batch_size" in p for p in bad.value.problems)
    with pytest.raises(ConfigError, match="no ledger at"):
        status(config)
    with pytest.raises(ConfigError, match="full_refresh"):
        sync(config, full_refresh=True)


def test_each_exit_code_has_its_exception_and_every_public_name_resolves() -> None:
    assert all(getattr(connector, name) is not None for name in connector.__all__)
    assert {
        cls.exit_code for cls in (ConfigError, AuthenticationFailed, Unsettled, NeedsAttention, connector.SourceFailed)
    } == {
        ExitCode.USAGE,
        ExitCode.AUTH,
        ExitCode.UNSETTLED,
        ExitCode.BLOCKED,
        ExitCode.SOURCE_FAILED,
    }
    assert all(
        issubclass(getattr(connector, name), connector.CaptureSyncError)
        for name in connector.__all__
        if name.endswith(("Error", "Failed"))
    )


EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples" / "orchestrators").glob("*.py"))


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
def test_each_orchestrator_example_runs_as_a_plain_script(kit, sandbox_factory, tmp_path: Path, example: Path) -> None:
    """Without its orchestrator installed, the example runs its function directly; with it, through it."""
    box = sandbox_factory()
    csv = tmp_path / "contacts.csv"
    kit.contacts(csv, [kit.contact(n) for n in range(1, 4)])
    config = _setup(kit, box, tmp_path, csv)

    ran = subprocess.run(
        [sys.executable, str(example)],
        capture_output=True,
        text=True,
        timeout=120,
        env=kit.env(CAPTURE_SYNC_CONFIG=str(config)),
    )

    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "captured" in ran.stdout
    assert {p["data"]["email"] for p in box.store.persons()} == {f"ada{n}@example.org" for n in range(1, 4)}
