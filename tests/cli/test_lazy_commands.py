"""The root `--help` lists every command from `connector.cli.COMMANDS` without importing it, with the
first line of the command's own help; `--help` and `--version` load none of the heavy libraries, and
the commands that only read the ledger load neither the HTTP client nor the mapping nor the engine,
nor structlog (whose dev renderer loads rich's tracebacks and pygments) nor asyncio; and logging
configured before structlog is imported still renders the first event of whoever imports it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from connector.cli import COMMANDS, load_command
from connector.ledger import Ledger

HEAVY = (
    "pydantic",
    "httpx",
    "sqlite_utils",
    "structlog",
    "apscheduler",
    "phonenumbers",
    "email_validator",
    "sqlalchemy",
    "fastapi",
    "uvicorn",
    "prometheus_client",
    "connector.sandbox",
    "connector.delivery",
    "connector.config",
    "connector.ledger",
    "connector.mapping",
)


def probe(modules: tuple[str, ...], then: str = "") -> str:
    """Runs the CLI in a fresh interpreter, runs `then` (code that prints to stderr) and prints which
    of `modules` it imported."""
    return f"""
import sys
from connector.cli import main
sys.argv = ["capture-sync", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
{then}
print("loaded:", *[m for m in {modules!r} if m in sys.modules], file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.parametrize("name", COMMANDS)
def test_each_listed_summary_is_the_first_line_of_the_commands_own_help(name: str) -> None:
    command = load_command(name)
    assert COMMANDS[name].summary == (command.help or "").strip().splitlines()[0]
    assert command.name == name


@pytest.mark.parametrize("args", [["--help"], ["--version"]], ids=" ".join)
def test_help_and_version_load_no_heavy_library(args: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-c", probe(HEAVY), *args], capture_output=True, text=True, check=True)
    assert proc.stderr.strip().splitlines()[-1] == "loaded:"


# What `status` and the other ledger-only commands must never need: they read the config's [ledger]
# table and the ledger, so a config whose sources or credentials are broken does not stop them.
NOT_FOR_THE_LEDGER = (
    "httpx",
    "phonenumbers",
    "email_validator",
    "sqlalchemy",
    "apscheduler",
    "fastapi",
    "connector.config",
    "connector.delivery",
    "connector.mapping",
    "connector.api",
    "structlog",  # at the first event only: its import loads rich.traceback and pygments
    "rich.traceback",
    "pygments",
    "asyncio",  # the daemon's end of the control socket alone
)


@pytest.mark.parametrize("args", [["status"], ["runs", "list"], ["ledger", "list", "--state", "pending"]], ids=" ".join)
def test_ledger_only_commands_work_with_broken_sources_and_load_no_client(kit, tmp_path, args: list[str]) -> None:
    config = kit.config(tmp_path, "http://127.0.0.1:9/api/v1/capture", tmp_path / "contacts.csv")
    # A source type that does not exist and no credentials: a sync would refuse this config.
    config.write_text(config.read_text().replace('type = "csv"', 'type = "nonesuch"'))
    Ledger(tmp_path / "ledger.sqlite3").close()
    proc = subprocess.run(
        [sys.executable, "-c", probe(NOT_FOR_THE_LEDGER), *args, "-c", str(config)],
        capture_output=True,
        text=True,
        env=kit.env(),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "loaded:"


# What a sync of plain addresses into a ledger that exists already never needs: the email validator
# (the shortcut `api.models._is_plain_email` takes plain addresses) and sqlite-utils (which creates and
# migrates a ledger only); nor click and typer's rich help, which only `--help` and errors show; nor
# the daemon's control channel (only when a daemon holds the ledger), the crontab parser (its
# schedules are all `every N`), the PostgreSQL engine (its ledger is a SQLite file), the ledger's
# read-only views (a sync counts, it lists nothing) or its operator commands; nor phonenumbers, as
# no field of its mapping has the e164 transform, nor the alerts, as its config has no [[alerts]].
NOT_FOR_A_SYNC = (
    "phonenumbers",
    "connector.alerts",
    "email_validator",
    "sqlite_utils",
    "typer.rich_utils",
    "connector.control",
    "apscheduler.triggers.cron",
    "connector.ledger._postgres",
    "connector.ledger.views",
    "connector.ledger._copy",
    "connector.ledger._operator",
)
COLLECTOR = """
import gc, os
print("collector:", gc.isenabled(), gc.get_freeze_count() > 0, os.environ.get("PYDANTIC_DISABLE_PLUGINS"), file=sys.stderr)
"""


@pytest.mark.parametrize("plugins", [None, ""], ids=["plugins-default", "plugins-asked-for"])
def test_a_sync_loads_only_what_it_uses_and_runs_with_the_collector_on(
    kit, sandbox, tmp_path, plugins: str | None
) -> None:
    config = kit.integration(sandbox, tmp_path, "crm", [kit.contact(1), kit.contact(2)], "every 5m")
    Ledger(config.parent / "ledger.sqlite3").close()
    env = kit.env() if plugins is None else kit.env(PYDANTIC_DISABLE_PLUGINS=plugins)
    proc = subprocess.run(
        [sys.executable, "-c", probe(NOT_FOR_A_SYNC, then=COLLECTOR), "sync", "-c", str(config)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "captured       2" in proc.stdout
    *_, collector, loaded = proc.stderr.strip().splitlines()
    assert loaded == "loaded:"
    # Off while the command's modules loaded, then on for the work, the start-up's objects frozen;
    # pydantic's plugins are skipped unless the environment says otherwise (an empty value: load them).
    assert collector == f"collector: True True {'__all__' if plugins is None else ''}"


# Which libraries were loaded when the sync sent its first capture request.
AT_FIRST_CAPTURE = """
import sys
import connector.api._exchange as exchange
seen = []
send = exchange.Exchange.send
async def noted(self, method, path, *args):
    if method == "POST" and not seen:
        seen.append([m for m in ("structlog", "rich.traceback") if m in sys.modules])
    return await send(self, method, path, *args)
exchange.Exchange.send = noted
from connector.cli import main
sys.argv = ["capture-sync", *sys.argv[1:]]
try:
    main()
finally:
    print("at the first capture:", *seen[0], file=sys.stderr)
"""


def test_a_sync_whose_flow_passed_sends_its_first_capture_before_loading_structlog(kit, sandbox, tmp_path) -> None:
    """structlog (and with it rich's tracebacks) loads at the first event the level lets through:
    here `run.finished`, after the deliveries; the debug events of each request before it are dropped
    without it, as its `filter_by_level` would drop them."""
    config = kit.integration(sandbox, tmp_path, "crm", [kit.contact(1), kit.contact(2)], "every 5m")
    with Ledger(config.parent / "ledger.sqlite3") as ledger:
        ledger.record_flow_pass(sandbox.base_url, "crm", {})
    proc = subprocess.run(
        [sys.executable, "-c", AT_FIRST_CAPTURE, "sync", "-c", str(config)],
        capture_output=True,
        text=True,
        env=kit.env(),
    )
    assert proc.returncode == 0, proc.stderr
    *events, first_capture = proc.stderr.strip().splitlines()
    assert first_capture == "at the first capture:"
    assert [json.loads(line)["event"] for line in events] == ["run.finished"]


def test_an_unknown_command_is_refused_as_before() -> None:
    import typer.main

    from connector.cli import app

    group = typer.main.get_command(app)
    assert group is not None
    assert group.get_command(typer.Context(group), "nonesuch") is None


# A module or plugin that imports structlog itself after `configure` (as every engine module does).
LATE_IMPORT = """
import sys
from connector import logs
logs.configure("INFO", json={json}, stream=sys.stderr)
assert "structlog" not in sys.modules
import structlog
structlog.get_logger("capture_sync.probe").info("probe.event", email="ann@example.org", secret_free=1)
import logging
logging.getLogger("httpx").warning("HTTP Request: POST https://user:pw@example.org/x?token=abc")
"""


@pytest.mark.parametrize("json", [True, False], ids=["json", "console"])
def test_logging_configured_before_structlog_is_imported_renders_the_first_event(json: bool) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", LATE_IMPORT.format(json=json)], capture_output=True, text=True, check=True
    )
    assert proc.stdout == ""  # an unconfigured structlog would print the event, email and all, here
    lines = proc.stderr.splitlines()
    assert len(lines) == 2, proc.stderr
    assert "probe.event" in lines[0] and "<redacted>" in lines[0] and "ann@example.org" not in lines[0]
    assert "pw@" not in lines[1] and "token=abc" not in lines[1]
    if json:
        import json as json_module

        event = json_module.loads(lines[0])
        assert (event["event"], event["level"], event["logger"]) == ("probe.event", "info", "capture_sync.probe")
    else:
        assert lines[0].lstrip("0123456789-:.TZ ").startswith("[info")


def test_a_sqlite_ledger_refuses_a_lease_and_never_loads_the_postgresql_engine(tmp_path) -> None:
    """The engine loads only for a PostgreSQL ledger (store.py imports it where it is needed); a
    SQLite file still refuses a lease, as it did when the engine was always loaded. Here, not in the
    lease tests, whose module needs psycopg."""
    probe = f"""
import sys
from connector.ledger import Ledger, LedgerError
with Ledger({str(tmp_path / "ledger.sqlite3")!r}) as ledger:
    loaded = "connector.ledger._postgres" in sys.modules
    try:
        ledger.lease("daemon-a", 30)
    except LedgerError as exc:
        print(loaded, exc)
"""
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert proc.stdout.startswith("False ledger "), proc.stdout + proc.stderr
    assert "is a SQLite file: leases and standby daemons need a PostgreSQL ledger" in proc.stdout


def test_every_name_the_ledger_package_exports_resolves() -> None:
    """The views' names load on first use (PEP 562): a name in `__all__` missing from `_VIEWS`
    would fail only at runtime, out of mypy's sight."""
    import connector.ledger as ledger

    assert [name for name in ledger.__all__ if not hasattr(ledger, name)] == []
    with pytest.raises(AttributeError):
        ledger.StatusRepot  # noqa: B018
