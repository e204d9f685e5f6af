"""`CAPTURE_SYNC__<SECTION>__<KEY>`: every config key from the environment under one naming rule,
values read as TOML when they are TOML; credentials never; an unknown key names its variable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from connector.config import load_config
from connector.problems import ConfigProblem


@pytest.fixture
def config(kit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in [v for v in os.environ if v.startswith("CAPTURE")]:
        monkeypatch.delenv(var)
    kit.credentials(tmp_path, "key", "secret")
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1)])
    return kit.config(tmp_path, "http://127.0.0.1:9/api/v1/capture", contacts)


def test_numbers_schedules_nested_keys_and_source_options_come_from_the_environment(config, monkeypatch) -> None:
    monkeypatch.setenv("CAPTURE_SYNC__CAPTURE__BATCH_SIZE", "50")
    monkeypatch.setenv("CAPTURE_SYNC__DAEMON__RETRY_SWEEP", "every 1m")
    monkeypatch.setenv("CAPTURE_SYNC__CAPTURE__RETRY__MAX_ATTEMPTS", "3")
    monkeypatch.setenv("CAPTURE_SYNC__CAPTURE__ALLOW_INSECURE_HTTP", "true")
    monkeypatch.setenv("CAPTURE_SYNC__SOURCES__SIGNUPS__PRIMARY_KEY", "Email")
    monkeypatch.setenv("CAPTURE_SYNC__SOURCES__SIGNUPS__SCHEDULE", "*/10 * * * *")
    cfg = load_config(config)
    assert cfg.capture.batch_size == 50 and cfg.delivery_settings().batch_size == 50
    assert cfg.daemon.retry_sweep == "every 1m"
    assert (
        cfg.capture.retry.max_attempts == 3 and cfg.capture.retry.initial_backoff_s == 0.05
    )  # the file's sibling key stays
    assert cfg.capture.allow_insecure_http is True
    [source] = cfg.sources
    assert source.job.source.options.primary_key == "Email" and source.schedule == "*/10 * * * *"


@pytest.mark.parametrize(
    ("var", "value", "said"),
    [
        (
            "CAPTURE_SYNC__CAPTURE__BATCH_SIZ",
            "5",
            "env CAPTURE_SYNC__CAPTURE__BATCH_SIZ: unknown key capture.batch_siz",
        ),
        ("CAPTURE_SYNC__LEDGERS__PATH", "x", "env CAPTURE_SYNC__LEDGERS__PATH: unknown section 'ledgers'"),
        ("CAPTURE_SYNC__CAPTURE__RETRY__MAX_TRIES", "5", "unknown key capture.retry.max_tries"),
        (
            "CAPTURE_SYNC__SOURCES__NOPE__PATH",
            "x",
            "env CAPTURE_SYNC__SOURCES__NOPE__PATH: no sources entry named like 'nope'",
        ),
        (
            "CAPTURE_SYNC__SOURCES__SIGNUPS__NOPE",
            "1",
            "sources.signups.nope: unknown option (set by env CAPTURE_SYNC__SOURCES__SIGNUPS__NOPE)",
        ),
        ("CAPTURE_SYNC__CAPTURE__BATCH_SIZE", "500", "(set by env CAPTURE_SYNC__CAPTURE__BATCH_SIZE)"),
        (
            "CAPTURE_SYNC__CAPTURE__API_SECRET",
            "s3cret",
            "env CAPTURE_SYNC__CAPTURE__API_SECRET: credentials are not taken from",
        ),
        ("CAPTURE_SYNC__CAPTURE__API_KEY", "k", "set env CAPTURE_API_KEY"),
    ],
)
def test_an_override_that_cannot_apply_is_a_config_problem_naming_its_variable(
    config, monkeypatch, var, value, said
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigProblem) as caught:
        load_config(config)
    assert any(p.startswith(f"{config}: ") and said in p for p in caught.value.problems), caught.value.problems
    assert "s3cret" not in str(caught.value)


def test_a_value_that_is_not_toml_is_a_string_and_quotes_force_one(config, monkeypatch) -> None:
    monkeypatch.setenv("CAPTURE_SYNC__LEDGER__PATH", "other.sqlite3")
    monkeypatch.setenv("CAPTURE_SYNC__SOURCES__SIGNUPS__PRIMARY_KEY", '"42"')
    cfg = load_config(config)
    assert cfg.ledger_path == config.parent / "other.sqlite3"
    assert cfg.sources[0].job.source.options.primary_key == "42"


def test_the_cli_exits_2_with_the_variable_named(kit, config) -> None:
    result = kit.run("check", "-c", str(config), env=kit.env(CAPTURE_SYNC__CAPTURE__BATCH_SIZ="5"))
    assert result.code == 2
    assert f"{config}: env CAPTURE_SYNC__CAPTURE__BATCH_SIZ: unknown key capture.batch_siz" in result.stderr


def test_a_ledger_only_command_reads_the_ledger_overrides_and_names_a_wrong_one(kit, config) -> None:
    """`status` reads the [ledger] table alone: its overrides apply and a typo there is refused;
    the other sections' are not its business (`check` reports them)."""
    moved = config.parent / "moved.sqlite3"
    result = kit.run("status", "-c", str(config), env=kit.env(CAPTURE_SYNC__LEDGER__PATH=str(moved)))
    assert result.code == 2 and f"no ledger at {moved}" in result.stderr
    result = kit.run("status", "-c", str(config), env=kit.env(CAPTURE_SYNC__LEDGER__SYNCHRONOUS="SOMETIMES"))
    assert result.code == 2 and "(set by env CAPTURE_SYNC__LEDGER__SYNCHRONOUS)" in result.stderr
    result = kit.run("status", "-c", str(config), env=kit.env(CAPTURE_SYNC__LEDGER__PAHT="x"))
    assert result.code == 2 and "env CAPTURE_SYNC__LEDGER__PAHT: unknown key ledger.paht" in result.stderr
