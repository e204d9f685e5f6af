"""The HTTP control of a process that runs several integrations (`run -c a -c b --http`): each is
steered at the address of its status page, `POST /integrations/<name>/control/<command>`; the bare
`/control/<command>` names none and is refused (409, naming them) rather than steering one of them.
On a shared PostgreSQL ledger, a command for an integration this process stands by for reaches the
daemon that leads it, in another process, through the ledger; a request whose NOTIFY was lost is
still taken, on the leader's slow poll.

Each integration is steered with its own config's `[daemon] control_token_file` only: another
integration's token is refused (403), and an integration whose config sets none takes no command over
HTTP. Every daemon is a real `capture-sync run --http 127.0.0.1:0`."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import psycopg

from connector.control import daemon_state

TOKEN = "many-integrations-control-token"
OWN = "the token of the integration asked"  # `_post`'s default


def token_of(name: str) -> str:
    """The control token of integration `name` (each its own)."""
    return f"{name}-{TOKEN}"


YEARLY = "0 0 1 1 *"  # a cron tick the test never meets: nothing runs but what the test asks for


def _integrations(
    kit, sandbox, tmp_path: Path, names: tuple[str, ...], ledger_url: str | None = None, steered: int | None = None
) -> list[Path]:
    """One config per name, each in its folder with its own API client, csv of 2 rows and ledger (or
    the shared PostgreSQL `ledger_url`); the first `steered` (all by default) hold their control token."""
    configs = []
    for i, name in enumerate(names):
        written = kit.integration(
            sandbox, tmp_path, name, [kit.contact(n) for n in range(i * 100, i * 100 + 2)], YEARLY
        )
        folder, text = written.parent, written.read_text()
        if ledger_url is not None:
            text = text.replace('[ledger]\npath = "ledger.sqlite3"', f"[ledger]\nurl = {json.dumps(ledger_url)}")
        daemon = "lease_s = 3\n" if ledger_url is not None else ""
        if steered is None or i < steered:
            (folder / "control_token").write_text(token_of(name) + "\n")
            (folder / "control_token").chmod(0o600)
            daemon += 'control_token_file = "control_token"\n'
        config = folder / f"{name}.toml"
        config.write_text(f'[integration]\nname = "{name}"\n\n' + text + (f"\n[daemon]\n{daemon}" if daemon else ""))
        configs.append(config)
    return configs


def _post(url: str, path: str, body: dict | None = None, token: str | None = OWN) -> httpx.Response:
    """POST with `token`; by default the token of the integration the path names (crm-eu's for a bare path)."""
    if token is OWN:
        token = token_of(path.split("/")[2] if path.startswith("/integrations/") else "crm-eu")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(url + path, json=body or {}, headers=headers, timeout=60)


def _requests(log: Path) -> list[tuple[str, str, str | None]]:
    """(command, via, integration) of each control.request the daemon logged."""
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    return [(e["command"], e["via"], e.get("integration")) for e in events if e.get("event") == "control.request"]


def test_each_integration_is_steered_at_its_own_address_and_a_bare_command_is_refused(
    kit, sandbox, start_daemon, tmp_path: Path
) -> None:
    eu, us = _integrations(kit, sandbox, tmp_path, ("crm-eu", "crm-us"))
    daemon = start_daemon(eu, "-c", str(us))

    bare = _post(daemon.url, "/control/pause", {"source": "signups"})
    assert bare.status_code == 409, bare.text
    assert bare.json()["integrations"] == ["crm-eu", "crm-us"]
    assert "/integrations/<name>/control/<command>" in bare.json()["error"]
    assert _post(daemon.url, "/integrations/crm-us/control/pause", token=None).status_code == 401
    assert _post(daemon.url, "/integrations/crm-us/control/pause", token="wrong").status_code == 401
    unknown = _post(daemon.url, "/integrations/nobody/control/pause", token=token_of("crm-eu"))
    assert unknown.status_code == 404 and "crm-eu, crm-us" in unknown.json()["error"], unknown.text
    assert _post(daemon.url, "/integrations/crm-us/control/nope").status_code == 404
    for ledger in (eu.parent / "ledger.sqlite3", us.parent / "ledger.sqlite3"):
        assert daemon_state(ledger)["paused"] == {}  # nothing done by any of those

    paused = _post(daemon.url, "/integrations/crm-us/control/pause", {"source": "signups"})
    assert paused.status_code == 200 and paused.json()["paused"].keys() == {"signups"}, paused.text
    assert daemon_state(us.parent / "ledger.sqlite3")["paused"].keys() == {"signups"}
    assert daemon_state(eu.parent / "ledger.sqlite3")["paused"] == {}  # the other integration untouched

    synced = _post(daemon.url, "/integrations/crm-eu/control/sync")
    assert synced.status_code == 200 and synced.json()["exit_code"] == 0, synced.text
    assert sorted(p["data"]["email"] for p in sandbox.store.persons()) == sorted(
        kit.contact(n)["Email"] for n in (0, 1)
    )  # crm-eu's rows only: crm-us was not asked
    assert _post(daemon.url, "/integrations/crm-us/control/resume").json()["resumed"] == ["signups"]
    assert [r for r in _requests(daemon.log) if r[1] == "http"] == [
        ("pause", "http", "crm-us"),
        ("sync", "http", "crm-eu"),
        ("resume", "http", "crm-us"),
    ]
    assert ("state", "socket", "crm-us") in _requests(daemon.log)  # `daemon_state` above, over crm-us's socket
    assert daemon.stop() == 0, daemon.log.read_text()


def test_an_integration_takes_commands_with_its_own_token_only(kit, sandbox, start_daemon, tmp_path: Path) -> None:
    eu, us, apac = _integrations(kit, sandbox, tmp_path, ("crm-eu", "crm-us", "crm-apac"), steered=2)
    daemon = start_daemon(eu, "-c", str(us), "-c", str(apac))
    ledgers = {name: tmp_path / name / "ledger.sqlite3" for name in ("crm-eu", "crm-us", "crm-apac")}

    crossed = _post(daemon.url, "/integrations/crm-us/control/pause", {"source": "signups"}, token=token_of("crm-eu"))
    assert crossed.status_code == 403, crossed.text
    assert "crm-us" in crossed.json()["error"] and "control_token_file" in crossed.json()["error"]
    unsteered = _post(
        daemon.url, "/integrations/crm-apac/control/pause", {"source": "signups"}, token=token_of("crm-eu")
    )
    assert unsteered.status_code == 403, unsteered.text
    assert "control_token_file" in unsteered.json()["error"] and str(apac) in unsteered.json()["error"]
    assert _post(daemon.url, "/integrations/crm-apac/control/pause", token=None).status_code == 401
    assert all(daemon_state(ledger)["paused"] == {} for ledger in ledgers.values())  # nothing done

    own = _post(daemon.url, "/integrations/crm-us/control/pause", {"source": "signups"})
    assert own.status_code == 200 and own.json()["paused"].keys() == {"signups"}, own.text
    assert [name for name, ledger in ledgers.items() if daemon_state(ledger)["paused"]] == ["crm-us"]
    assert daemon.stop() == 0, daemon.log.read_text()


def _roles(daemon) -> dict[str, bool]:
    """integration -> whether this daemon leads it, from /readyz."""
    return {name: role["leads"] for name, role in daemon.get("/readyz").json()["integrations"].items()}


def test_a_command_for_an_integration_this_process_stands_by_for_reaches_its_leader(
    kit, sandbox, start_daemon, tmp_path: Path, postgres_ledger_url: str
) -> None:
    configs = _integrations(kit, sandbox, tmp_path, ("alpha", "beta"), postgres_ledger_url)
    first = start_daemon(configs[0], "-c", str(configs[1]))
    first.poll(lambda: _roles(first) == {"alpha": True, "beta": True}, "the first daemon to lead both")
    second = start_daemon(configs[0], "-c", str(configs[1]))  # balancing hands it one of the two
    second.poll(lambda: sum(_roles(second).values()) == 1 and sum(_roles(first).values()) == 1, "one each")
    standby = next(name for name, leads in _roles(second).items() if not leads)
    led = next(name for name, leads in _roles(second).items() if leads)

    paused = _post(second.url, f"/integrations/{standby}/control/pause", {"source": "signups"})
    assert paused.status_code == 200 and paused.json()["ok"], paused.text
    assert paused.json()["paused"].keys() == {"signups"}
    # asked over HTTP of the standby, run by the leader: it took the request from the ledger
    assert ("pause", "ledger", standby) in _requests(first.log), first.log.read_text()
    assert ("pause", "http", standby) in _requests(second.log)
    state = _post(second.url, f"/integrations/{led}/control/state")
    assert state.status_code == 200 and state.json()["paused"] == {}, state.text  # its own: asked here
    assert ("state", "ledger", led) not in _requests(first.log)
    synced = _post(first.url, f"/integrations/{led}/control/sync")  # the other way round
    assert synced.status_code == 200 and synced.json()["exit_code"] == 0, synced.text
    assert ("sync", "ledger", led) in _requests(second.log)
    assert _post(second.url, "/control/state", token=token_of("alpha")).status_code == 409

    with psycopg.connect(postgres_ledger_url, autocommit=True) as conn:  # asked without a NOTIFY (lost)
        request = conn.execute(
            "INSERT INTO capture_sync_ha.requests (integration, command, args, asked_at) "
            "VALUES (%s, 'state', '{}', now()) RETURNING id",
            (led,),
        ).fetchone()[0]

    def answered() -> bool:
        with psycopg.connect(postgres_ledger_url, autocommit=True) as conn:
            return conn.execute("SELECT answer FROM capture_sync_ha.requests WHERE id = %s", (request,)).fetchone()[0]

    second.poll(answered, "the leader's slow poll to take a request whose doorbell never rang")

    assert second.stop() == 0, second.log.read_text()
    assert first.stop() == 0, first.log.read_text()
