"""`[[alerts]]` in the config: the URL from the file, env or a file beside the config (masked in logs
from the moment it is read, never quoted in a problem), conditions and thresholds checked, every
problem named as `FILE: alerts[i].key: what`."""

from __future__ import annotations

from pathlib import Path

import pytest

from connector import logs
from connector.alerts import CONDITIONS
from connector.config import load_config
from connector.problems import ConfigProblem

BASE = """
[capture]
base_url = "http://127.0.0.1:8765/api/v1/capture"

[ledger]
path = "ledger.sqlite3"

[[sources]]
name = "signups"
type = "csv"
path = "signups.csv"

[sources.mapping]
first_name = "First"
email = "Email"
"""
HOOK = "https://hooks.example.org/services/T000/B000/sekr1t-token-value"


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("CAPTURE_BASE_URL", "CAPTURE_API_KEY", "CAPTURE_API_SECRET", "CAPTURE_SYNC_CONFIG", "ALERT_HOOK"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def write(folder: Path, alerts: str) -> Path:
    path = folder / "capture-sync.toml"
    path.write_text(BASE + alerts)
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(ConfigProblem) as info:
        load_config(path)
    return info.value.problems


def test_no_alerts_is_the_default(folder: Path) -> None:
    assert load_config(write(folder, "")).alerts == ()


def test_an_entry_takes_its_url_from_env_or_a_file_beside_the_config(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALERT_HOOK", HOOK)
    (folder / "hook").write_text(HOOK.replace("sekr1t", "other") + "\n")
    cfg = load_config(
        write(
            folder,
            """
[[alerts]]
url_env = "ALERT_HOOK"

[[alerts]]
name = "ops-slack"
url_file = "hook"
format = "slack"
conditions = ["outage", "reject_rate"]
outage_after = "2m"
reject_share = 0.25
reject_min_read = 40
stale_after = "1d"
""",
        )
    )
    first, second = cfg.alerts
    assert (first.label, first.url.get_secret_value(), first.settings.format) == ("alerts[0]", HOOK, "json")
    assert first.settings.conditions == CONDITIONS and first.settings.outage_after == 600
    assert second.label == "ops-slack" and second.url.get_secret_value().startswith("https://hooks.example.org/")
    s = second.settings
    assert (s.format, s.conditions, s.outage_after, s.reject_share, s.reject_min_read, s.stale_after) == (
        "slack",
        ("outage", "reject_rate"),
        120.0,
        0.25,
        40,
        86400.0,
    )


def test_every_problem_is_named_by_its_entry_and_key(folder: Path) -> None:
    path = write(
        folder,
        """
[[alerts]]
url_env = "ALERT_HOOK"

[[alerts]]
url_file = "missing-hook"

[[alerts]]
url = "https://a.example.org/x"
url_env = "ALERT_HOOK"

[[alerts]]
url = "https://a.example.org/x"
format = "teams"
conditions = ["outage", "disk_full"]
outage_after = "soon"
reject_share = 1.5
colour = "red"

[[alerts]]
url = "http://hooks.example.org/plain"

[[alerts]]
url = "ftp://hooks.example.org/x"
""",
    )
    found = [p.removeprefix(f"{path}: ") for p in problems(path)]
    assert found[0] == "alerts[0].url_env: env ALERT_HOOK is not set or empty"
    assert found[1].startswith(f"alerts[1].url_file: cannot read {folder / 'missing-hook'}")
    assert found[2].startswith("alerts[2]: ") and "exactly one of url, url_env" in found[2]
    bad = [p for p in found if p.startswith("alerts[3]")]
    assert {p.split(":")[0] for p in bad} == {
        "alerts[3].format",
        "alerts[3].conditions.1",
        "alerts[3].outage_after",
        "alerts[3].reject_share",
        "alerts[3].colour",
    }
    assert "alerts[3].outage_after: must be a positive duration" in " ".join(bad)
    assert "alerts[3].colour: unknown option" in bad
    assert found[-2].startswith("alerts[4].url: refusing plain http")
    assert found[-1] == "alerts[5].url: must be an http(s) URL with a host"
    assert all("hooks.example.org" not in p for p in found)  # a problem never quotes the URL


def test_alerts_must_be_an_array_of_tables_and_the_tick_a_schedule(folder: Path) -> None:
    path = write(folder, '\n[daemon]\nalerts_check = "sometimes"\n').read_text()
    (folder / "capture-sync.toml").write_text(path.replace("[capture]", 'alerts = "yes"\n\n[capture]'))
    found = problems(folder / "capture-sync.toml")
    assert any(p.endswith("alerts: must be an array of tables ([[alerts]])") for p in found)
    assert any("daemon.alerts_check:" in p for p in found)


def test_the_url_is_masked_in_logs_once_read(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALERT_HOOK", HOOK)
    load_config(write(folder, '[[alerts]]\nurl_env = "ALERT_HOOK"\n'))
    assert logs.redact_secrets(None, "info", {"event": "posting", "to": f"POST {HOOK}"}) == {
        "event": "posting",
        "to": "POST https://hooks.example.org/***",  # its origin only: the path is the token
    }


def test_an_empty_url_file_is_named_without_its_content(folder: Path) -> None:
    (folder / "hook").write_text("\n")
    [problem] = problems(write(folder, '[[alerts]]\nurl_file = "hook"\n'))
    assert problem.endswith(f"alerts[0].url_file: {folder / 'hook'} is empty")


def test_the_example_config_shows_an_alerts_entry_that_loads_when_uncommented(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    example = (Path(__file__).resolve().parents[2] / "config" / "capture-sync.example.toml").read_text()
    block = example[example.index("# [[alerts]]") :]
    monkeypatch.setenv("CAPTURE_SYNC_ALERT_URL", HOOK)
    entry = "\n".join(line.removeprefix("# ") for line in block.splitlines() if line.startswith("# "))
    [alert] = load_config(write(folder, "\n" + entry + "\n")).alerts
    assert alert.settings.format == "slack" and alert.settings.stale_after == 7200
