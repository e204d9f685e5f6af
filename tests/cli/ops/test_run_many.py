"""`run -c a.toml -c b.toml` and `run --configs DIR`: several integrations in one process, each with
its own API client, sources, schedule and ledger; both deliver, each naming itself on every line it
logs, and SIGTERM stops them together (exit 0)."""

from __future__ import annotations

import json
from pathlib import Path


def _two_integrations(kit, sandbox, tmp_path: Path) -> list[Path]:
    """crm-eu.toml and crm-us.toml, each in its own folder beside its credentials, csv and ledger."""
    configs = []
    for name, first in (("crm-eu", 0), ("crm-us", 100)):
        config = kit.integration(sandbox, tmp_path, name, [kit.contact(n) for n in range(first, first + 4)], "every 1s")
        configs.append(config.rename(config.parent / f"{name}.toml"))
    return configs


def _assert_each_delivered(kit, configs: list[Path]) -> None:
    for config in configs:
        status = json.loads(kit.run("status", "-c", str(config), "--json").stdout)
        assert status["by_state"]["captured"] == 4  # each its own ledger


def _assert_lines_name_their_integration(log: Path) -> None:
    """Every line of an integration's work (its daemon, its control socket, its deliveries) says
    which (`integration=`, a structlog context field): two integrations log into one stream."""
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    work = [
        e for e in events if e["logger"] in ("capture_sync.daemon", "capture_sync.delivery", "capture_sync.control")
    ]
    unnamed = [e for e in work if "integration" not in e and e["event"] != "stop requested"]  # the process's signal
    assert not unnamed, unnamed
    for event in ("daemon started", "control.listening", "batch.settled", "run.finished", "daemon stopped"):
        assert {e["integration"] for e in work if e["event"] == event} == {"crm-eu", "crm-us"}, event
    served = next(e for e in events if e["event"] == "ops.serving")
    assert "integration" not in served  # the process's server, for both


def test_one_process_runs_two_integrations_and_serves_both(kit, sandbox, start_daemon, tmp_path: Path) -> None:
    configs = _two_integrations(kit, sandbox, tmp_path)
    daemon = start_daemon(configs[0], "-c", str(configs[1]), "-v")  # debug: batch.settled of a batch gone well
    daemon.poll(lambda: len(sandbox.store.persons()) == 8, "both integrations to deliver")
    _assert_each_delivered(kit, configs)
    # --http serves both: their series in one scrape, ready when both are, a page listing them
    scrape = daemon.metrics()
    assert scrape.integrations == {"crm-eu", "crm-us"}
    text = daemon.get("/metrics").text
    assert text.count("# TYPE capture_sync_entries gauge") == 1, text  # one family, a series per integration
    for name in ("crm-eu", "crm-us"):
        assert f'capture_sync_entries{{integration="{name}",source="signups",state="captured"}} 4.0' in text, text
    ready = daemon.get("/readyz")
    assert ready.status_code == 200 and ready.json()["ready"], ready.text
    page = daemon.get("/").text
    assert 'href="/integrations/crm-eu"' in page and 'href="/integrations/crm-us"' in page, page
    assert "crm-us" in daemon.get("/integrations/crm-us").text
    assert daemon.get("/integrations/nobody").status_code == 404
    assert daemon.stop() == 0, daemon.log.read_text()
    _assert_lines_name_their_integration(daemon.log)

    twice = kit.run("run", "-c", str(configs[0]), "-c", str(configs[0]))
    assert twice.code == 2 and "name the same integration" in twice.stderr, twice.stderr


def test_configs_folder_runs_every_config_in_it(kit, sandbox, start_daemon, tmp_path: Path) -> None:
    """One folder holds both configs (their files named by absolute path, as in /etc/…/integrations.d)."""
    folder = tmp_path / "integrations.d"
    folder.mkdir()
    configs = []
    for config in _two_integrations(kit, sandbox, tmp_path):
        text = config.read_text()
        for relative in ("api_key", "api_secret", "ledger.sqlite3"):
            text = text.replace(f'"{relative}"', json.dumps(str(config.parent / relative)))
        configs.append(folder / config.name)
        configs[-1].write_text(text)
    (folder / "README").write_text("not a config: only *.toml files are read\n")

    daemon = start_daemon(None, "--configs", str(folder))
    daemon.poll(lambda: len(sandbox.store.persons()) == 8, "both integrations of the folder to deliver")
    _assert_each_delivered(kit, configs)
    assert daemon.stop() == 0, daemon.log.read_text()

    empty = tmp_path / "empty.d"
    empty.mkdir()
    none = kit.run("run", "--configs", str(empty))
    assert none.code == 2 and "no *.toml file" in none.stderr, none.stderr
