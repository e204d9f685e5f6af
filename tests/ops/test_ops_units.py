"""The operations endpoints' promises, piece by piece: where they may listen, what a scrape may hold,
when the daemon says it is ready, that the status page escapes what it did not write, and the
guards against hostile clients (the Host check, the limits, the open-files budget, the warnings)."""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import structlog
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from connector.api import ClientInfo
from connector.api.client import Attempt
from connector.config import load_config
from connector.delivery import AdaptiveRateLimiter, RunReport
from connector.health import DaemonHealth
from connector.ledger import STATES, Attention, BatchDetail, EntryView, Ledger, Mapped, RunView, StatusReport
from connector.ops import parse_address, raise_open_files_limit
from connector.ops._address import allowed_hosts, host_allowed
from connector.ops._fds import endpoint_connections
from connector.ops._metrics import Metrics
from connector.ops._page import PageSource, render
from connector.ops._served import Served
from connector.ops._server import OpsServer
from connector.ops._snapshot import LedgerReader, SettledTally, Snapshot
from connector.problems import ConfigProblem

EMAIL, RECORD = "ada.secret@example.org", "crm-row-4711"


def test_only_loopback_addresses_are_served_unless_the_operator_says_otherwise() -> None:
    assert str(parse_address("127.0.0.1:9464")) == "127.0.0.1:9464"
    assert str(parse_address("[::1]:0")) == "[::1]:0"
    assert parse_address("localhost:9464").port == 9464
    for public in ("0.0.0.0:9464", "10.1.2.3:9464", "metrics.example.org:9464"):
        with pytest.raises(ValueError, match="http_public"):
            parse_address(public)
    assert parse_address("0.0.0.0:9464", public=True).host == "0.0.0.0"
    for bad in ("9464", "127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000", ":9464"):
        with pytest.raises(ValueError, match="HOST:PORT"):
            parse_address(bad)


def _config(tmp_path: Path, daemon: str = "") -> Path:
    (tmp_path / "c.csv").write_text("id,Email\n1,a@example.org\n")
    path = tmp_path / "capture-sync.toml"
    path.write_text(
        'capture.base_url = "http://127.0.0.1:1/api/v1/capture"\n'
        f"[daemon]\n{daemon}\n"
        '[[sources]]\nname = "signups"\ntype = "csv"\npath = "c.csv"\nprimary_key = "id"\n'
        '[sources.mapping]\nname = "id"\nemail = "Email"\n'
    )
    return path


def test_a_public_http_address_in_the_config_is_a_problem_naming_its_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigProblem) as refused:
        load_config(_config(tmp_path, 'http_address = "0.0.0.0:9464"'))
    assert "daemon.http_address" in str(refused.value) and "http_public = true" in str(refused.value)
    allowed = load_config(_config(tmp_path, 'http_public = true\nhttp_address = "0.0.0.0:9464"'))
    assert allowed.daemon.http_address == "0.0.0.0:9464"


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    """A ledger holding one valid person and one rejected record, both carrying contact data."""
    path = tmp_path / "ledger.sqlite3"
    with Ledger(path) as ledger:
        ledger.enqueue(
            "signups",
            "m1",
            [
                Mapped(RECORD, payload=json.dumps({"name": "Ada", "email": EMAIL})),
                Mapped("row-2", raw={"Email": EMAIL + "x"}, reasons=("email: not an address",)),
            ],
            {"line": 2},
        )
    return path


def test_a_scrape_holds_no_key_email_or_record_value_and_follows_the_naming_conventions(ledger_path: Path) -> None:
    health = DaemonHealth()
    health.answered(ClientInfo(client_name="c", rate_limit=120, has_custom_field_mapping=False))
    health.passed("signups", RunReport(read=2, enqueued=1, rejected=1))
    client = SimpleNamespace(rate_gate=AdaptiveRateLimiter(120, 60.0), observers=[])
    metrics = Metrics(health, client, ["signups"], 60.0, integration="crm-eu")  # type: ignore[arg-type]
    person_key = "p-" + "a" * 40
    metrics.observe(Attempt("capture_bulk", "b-" + "f" * 32, time.time(), 0.2, 200))
    metrics.observe(Attempt("capture_person", person_key, time.time(), 30.0, None, number=2))
    metrics.state.snapshot = LedgerReader(ledger_path).snapshot(SettledTally(0.0), None)

    text = generate_latest(metrics.registry).decode()

    for secret in (EMAIL, RECORD, person_key, "b-" + "f" * 32, "not an address"):
        assert secret not in text
    allowed = {
        "integration": {"crm-eu"},
        "source": {"signups"},
        "state": set(STATES),
        "operation": {"capture_bulk", "capture_person"},
        "status": {"200", "none"},
    }
    for family in text_string_to_metric_families(text):
        assert family.name.startswith("capture_sync_"), family.name
        for sample in family.samples:
            if family.type == "counter":
                assert sample.name.endswith("_total"), sample.name
            for label, value in sample.labels.items():
                assert label == "le" or value in allowed[label], (sample.name, label, value)
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
    assert samples and all(s.labels["integration"] == "crm-eu" for s in samples)  # every series names its integration
    scrape = {
        (s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "integration"))): s.value for s in samples
    }
    assert scrape[("capture_sync_records_read_total", (("source", "signups"),))] == 2
    assert scrape[("capture_sync_entries", (("source", "signups"), ("state", "rejected")))] == 1
    assert scrape[("capture_sync_retries_total", (("operation", "capture_person"),))] == 1
    assert scrape[("capture_sync_requests_total", (("operation", "capture_person"), ("status", "none")))] == 1
    assert (
        scrape[("capture_sync_rate_limit_remaining_requests", ())] == 119
    )  # the attempt with no answer is not counted


async def test_ready_only_after_get_info_while_the_credentials_work_and_the_ledger_is_writable(
    tmp_path: Path, ledger_path: Path
) -> None:
    config = load_config(_config(tmp_path, 'http_address = "127.0.0.1:0"'))
    config = type(config)(**{**config.__dict__, "ledger": config.ledger.model_copy(update={"path": ledger_path})})
    health = DaemonHealth()
    server = OpsServer(parse_address("127.0.0.1:0"), config, health, SimpleNamespace(observers=[]))  # type: ignore[arg-type]

    assert await server.readiness() == ["GET /info has not succeeded yet"]
    health.answered(ClientInfo(client_name="c", rate_limit=10, has_custom_field_mapping=False))
    assert await server.readiness() == []
    health.refused("HTTP 401: invalid secret; key from file k, secret from file s", since=1_700_000_000.0)
    assert await server.readiness() == [f"authentication failing since 2023-11-14T22:13:20Z: {health.auth_failed}"]
    health.accepted()
    health.outage_since = 1_700_000_000.0
    assert await server.readiness() == ["delivery halted by an outage since 2023-11-14T22:13:20Z"]
    health.outage_since = None
    ledger_path.unlink()
    assert [r.split(":")[0] for r in await server.readiness()] == ["ledger not writable"]


async def test_a_process_running_two_integrations_is_ready_only_when_both_are(
    tmp_path: Path, ledger_path: Path
) -> None:
    loaded = load_config(_config(tmp_path, 'http_address = "127.0.0.1:0"'))
    config = type(loaded)(**{**loaded.__dict__, "ledger": loaded.ledger.model_copy(update={"path": ledger_path})})
    other = type(config)(**{**config.__dict__, "path": tmp_path / "crm-us.toml"})
    health, other_health = DaemonHealth(), DaemonHealth()
    client = SimpleNamespace(observers=[])
    served = Served(other, other_health, client, SimpleNamespace(paused={}))  # type: ignore[arg-type]
    server = OpsServer(parse_address("127.0.0.1:0"), config, health, client, more=[served])  # type: ignore[arg-type]

    info = ClientInfo(client_name="c", rate_limit=10, has_custom_field_mapping=False)
    health.answered(info)
    assert await server.readiness() == ["crm-us: GET /info has not succeeded yet"]
    other_health.answered(info)
    assert await server.readiness() == []


async def test_a_pass_that_ends_during_a_snapshot_read_is_counted_by_the_next_scrape(
    tmp_path: Path, ledger_path: Path
) -> None:
    """The settled counters come from a read that advances the tally to the last pass's end; a pass
    that ended while a read ran must make the next scrape read again, not wait 5 s for the age."""
    loaded = load_config(_config(tmp_path, 'http_address = "127.0.0.1:0"'))
    config = type(loaded)(**{**loaded.__dict__, "ledger": loaded.ledger.model_copy(update={"path": ledger_path})})
    health = DaemonHealth()
    served = Served(config, health, SimpleNamespace(observers=[]), SimpleNamespace(paused={}))  # type: ignore[arg-type]
    real, asked = served.reader, []

    class PassEndsMidRead:
        def snapshot(self, tally: SettledTally, passes_until: float | None) -> Snapshot:
            asked.append(passes_until)
            if len(asked) == 1:  # the pass's last settle and its end land while this read runs
                health.passed("signups", RunReport())
            return real.snapshot(tally, passes_until)

    served.reader = PassEndsMidRead()  # type: ignore[assignment]
    await served.snapshot()
    await served.snapshot()
    assert asked == [None, health.passes["signups"].at]


def _page(contact_data: bool) -> str:
    hostile = "<script>alert(1)</script>"
    member = EntryView(
        "p-1",
        "signups",
        '<img src=x onerror="alert(2)">',
        "blocked",
        None,
        None,
        None,
        payload={"name": "Quixote <b>bold</b>", "email": "quix<script>@example.org"},
    )
    report = StatusReport(
        by_state={"blocked": 1},
        by_source={"signups": {"blocked": 1}},
        runs=[RunView(1, "sync", "2026-01-01T00:00:00+00:00", 1.0, 5, {"blocked": 1})],
        oldest_unsettled="2026-01-01T00:00:00+00:00",
        attention=Attention(blocked=1),
    )
    batch = BatchDetail("b-1", "bulk", "blocked", hostile, [member], [])
    snapshot = Snapshot(0.0, report, [batch], 1, [], None)
    health = DaemonHealth()
    health.answered(ClientInfo(client_name=hostile, rate_limit=10, has_custom_field_mapping=False))
    return render(
        snapshot,
        health,
        [PageSource("signups", "every 5m")],
        Path("/etc/<cs>/c.toml"),
        ready=False,
        reasons=[f"authentication failing: {hostile}"],
        contact_data=contact_data,
    )


def test_the_status_page_escapes_every_value_and_shows_contact_data_only_when_asked() -> None:
    page = _page(contact_data=False)
    assert "<script>" not in page and "<img" not in page and "<b>bold" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the client name and the reason, escaped
    assert "capture-sync ledger resolve -c /etc/&lt;cs&gt;/c.toml b-1 --requeue" in page
    assert "quix" not in page and "Quixote" not in page and "onerror" not in page  # no contact data, no record id

    shown = _page(contact_data=True)
    assert "<script>" not in shown and "<img" not in shown
    assert "quix&lt;script&gt;@example.org" in shown and "Quixote &lt;b&gt;bold&lt;/b&gt;" in shown
    assert "&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in shown


def test_a_pass_that_did_its_work_is_a_success_whatever_older_entries_make_its_exit_code() -> None:
    health = DaemonHealth()
    old_blocked = RunReport(kind="sync", read=3, captured=3, blocked_total=1)  # exit 5: blocked from an earlier pass
    assert int(old_blocked.exit_code) == 5
    health.passed("signups", old_blocked)
    assert "signups" in health.last_success and health.ready is False  # ready still needs a GET /info
    outage = RunReport(kind="sync", read=3, halted_by="connection failed (ConnectError)", unsettled=3)
    health.passed("crm-export", outage)
    assert "crm-export" not in health.last_success and health.outage_since is not None
    assert any(r.startswith("delivery halted by an outage") for r in health.unready_reasons)
    health.passed("crm-export", RunReport(kind="sync", read=0))
    assert "crm-export" in health.last_success and health.outage_since is None


@pytest.mark.parametrize(
    ("header", "served"),
    [
        ("127.0.0.1:9464", True),
        ("localhost", True),
        ("LOCALHOST.:9464", True),
        ("status.example.org", True),
        ("[::1]:9464", True),
        ("10.1.2.3:9464", True),  # an IP address cannot be a rebound name
        ("rebound.attacker.example:9464", False),
        ("status.example.org.attacker.example", False),
        ("ada@127.0.0.1:9464", False),
        ("", False),
        (None, False),
    ],
)
def test_only_known_names_pass_the_host_check(header: str | None, served: bool) -> None:
    allowed = allowed_hosts(parse_address("127.0.0.1:9464"), ["Status.Example.org"])
    assert host_allowed(header, allowed) is served


def test_the_endpoint_limits_are_settings_with_safe_defaults(tmp_path: Path) -> None:
    daemon = load_config(_config(tmp_path)).daemon
    assert (daemon.http_header_timeout_s, daemon.http_body_timeout_s, daemon.http_max_connections) == (10.0, 30.0, 64)
    assert daemon.http_allowed_hosts == ()
    daemon = load_config(_config(tmp_path, 'http_allowed_hosts = ["status.example.org"]')).daemon
    assert daemon.http_allowed_hosts == ("status.example.org",)
    with pytest.raises(ConfigProblem) as refused:
        load_config(_config(tmp_path, "http_header_timeout_s = 0\nhttp_max_connections = 0"))
    assert "daemon.http_header_timeout_s" in str(refused.value) and "daemon.http_max_connections" in str(refused.value)


def test_the_daemon_raises_its_open_files_limit_and_the_endpoint_keeps_to_a_quarter_of_it() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(200, hard), hard))
        assert endpoint_connections(64) == min(200, hard) // 4 < 64
        assert raise_open_files_limit() == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == (hard if hard != resource.RLIM_INFINITY else 65536)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.parametrize(
    ("loopback", "public", "warned"),
    [
        (True, False, []),
        (True, True, ["ops.public_allowed"]),
        (False, True, ["ops.beyond_loopback"]),
    ],
)
async def test_serving_beyond_loopback_or_allowing_it_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback: bool, public: bool, warned: list[str]
) -> None:
    """127.0.0.2 plays a public address (tests listen on loopback only): the check is what is tested."""
    monkeypatch.setattr("connector.loopback.is_loopback", lambda host: loopback)
    config = load_config(_config(tmp_path))
    client = SimpleNamespace(observers=[])
    server = OpsServer(parse_address("127.0.0.2:0", public=public), config, DaemonHealth(), client)  # type: ignore[arg-type]
    with structlog.testing.capture_logs() as logged:
        await server.start()
        await server.stop()
    assert [e["event"] for e in logged if e["log_level"] == "warning"] == warned
