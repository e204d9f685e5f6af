"""What the daemon says while the API fails (issue 26), over real processes: `capture-sync run --http`
feeding a sandbox on loopback, alerts to a local webhook receiver.

- A non-retryable 503 stalls a batch: said at once (a warning `batch.stalled`, the page, a metric, a
  `stalled` alert on by default within one alerts check), never re-sent by the sweep, cleared once
  the entries are settled.
- Delivery halted follows the capture requests: /readyz stays not ready while they fail, however
  well GET /info answers; an outage alert's `since` and length are those of the requests.
- After a 401, at most the requests already in flight are refused: none more leaves until the
  credentials are verified again.
The sandbox's CaptureGate (tests/conftest.py) fails capture requests at will and counts its answers.
"""

from __future__ import annotations

import signal
import time
from datetime import datetime
from pathlib import Path

from connector.sandbox import Faults, SandboxStore

from ..test_alerts import FAST, Receiver, configure, events, persons, receiver  # noqa: F401 (receiver: a fixture)

CONCURRENCY = 4  # [capture] concurrency's default: requests in flight at once
OUTAGE_S = 6.0


def _at(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _bodies(hook: Receiver, condition: str) -> list[dict]:
    return [b for b in hook.received() if b["condition"] == condition]


def _log_time(event: dict) -> float:
    return _at(event["timestamp"])


def test_a_non_retryable_stall_is_said_at_once_never_swept_and_cleared_once_settled(
    kit,
    gated_sandbox,
    receiver,  # noqa: F811 (the fixture imported above)
    start_daemon,
    tmp_path: Path,
) -> None:
    box, gate = gated_sandbox()
    key, secret = box.create_client(rate_limit=100_000)
    kit.credentials(tmp_path, key, secret)
    hook = receiver()
    gate.captures = False  # every capture: 503 retryable false; GET /info answers
    config = configure(
        kit, tmp_path, box.base_url, [kit.contact(n) for n in range(5)], f'\n[[alerts]]\nurl = "{hook.url}"\n'
    )
    daemon = start_daemon(config)
    [started] = daemon.poll(lambda: _bodies(hook, "stalled"), "the stalled alert")
    [said] = events(daemon.log, "batch.stalled")
    assert said["level"] == "warning" and said["entries"] == 5
    assert said["reason"] == "HTTP 503 ServiceUnavailableError/capture_failed"
    assert said["then"] == (
        f"not retried automatically (spec 4.4 rule 4): `capture-sync replay -c {config}` re-sends them with the same keys"
    )
    assert _at(started["at"]) - _log_time(said) <= 1.0  # within one alerts check (every 1 s)
    assert started["counts"] == {"entries": 5, "batches": 1}
    assert started["details"] == {"reason": said["reason"], "then": said["then"]}
    assert started["command"] == f"capture-sync replay -c {config.absolute()}"
    assert started["summary"].startswith("5 entries in 1 batches were stopped by a non-retryable answer")
    assert daemon.metrics()("capture_sync_stalled_entries") == 5
    assert "5 entries stalled" in daemon.get("/").text

    finished = len(events(daemon.log, "run.finished"))
    daemon.poll(lambda: len(events(daemon.log, "run.finished")) >= finished + 3, "three more passes and sweeps")
    assert gate.count("bulk") == 1  # spec 4.4 rule 4: neither a pass nor the sweep re-sent it
    assert daemon.stop() == 0

    # The operator opts in to a scheduled retry; the API takes captures again.
    gate.captures = None
    config.write_text(config.read_text().replace(FAST, FAST + 'retry_stalled_every = "every 2s"\n'))
    again = start_daemon(config)
    again.poll(lambda: len(box.store.persons()) == 5, "the stalled batch re-sent on retry_stalled_every")
    cleared = again.poll(lambda: [b for b in _bodies(hook, "stalled") if b["status"] == "cleared"], "the stall cleared")
    assert [b["status"] for b in _bodies(hook, "stalled")] == [
        "started",
        "started",
        "cleared",
    ]  # the second daemon told it too
    assert "re-sent on [daemon] retry_stalled_every (every 2s" in _bodies(hook, "stalled")[1]["details"]["then"]
    assert cleared[0]["summary"] == "No entries wait in stalled batches any more."
    assert again.metrics()("capture_sync_stalled_entries") == 0
    assert again.stop() == 0


def test_delivery_stays_halted_while_capture_requests_fail_even_though_get_info_answers(
    kit, gated_sandbox, start_daemon, tmp_path: Path
) -> None:
    box, gate = gated_sandbox()
    key, secret = box.create_client(rate_limit=100_000)
    kit.credentials(tmp_path, key, secret)
    gate.captures = True  # every capture: 503 retryable; GET /info answers
    config = configure(kit, tmp_path, box.base_url, [kit.contact(n) for n in range(5)], "")
    daemon = start_daemon(config)
    daemon.poll(lambda: gate.count("bulk", 503), "a capture request failing")
    answered = gate.count("info", 200)
    daemon.poll(lambda: gate.count("info", 200) >= answered + 3, "three more GET /info answered")
    ready = daemon.get("/readyz")
    assert ready.status_code == 503, ready.text
    assert any(r.startswith("delivery halted by an outage since ") for r in ready.json()["reasons"])
    assert (daemon.metrics()("capture_sync_delivery_halted_seconds") or 0) > 0

    gate.captures = None
    daemon.poll(lambda: len(box.store.persons()) == 5, "every contact captured")
    daemon.poll(lambda: daemon.get("/readyz").status_code == 200, "ready again")
    assert daemon.metrics()("capture_sync_delivery_halted_seconds") == 0
    assert daemon.stop() == 0


def test_an_outage_alert_tells_the_real_outage_within_2_s(
    kit,
    sandbox_process,
    receiver,  # noqa: F811 (the fixture imported above)
    start_daemon,
    tmp_path: Path,
) -> None:
    box = sandbox_process()
    with SandboxStore(box.db) as store:
        key, secret = store.create_client("outage-timing", rate_limit=100_000)
    kit.credentials(tmp_path, key, secret)
    hook = receiver()
    config = configure(
        kit,
        tmp_path,
        box.base_url,
        [kit.contact(n) for n in range(5)],
        f'\n[[alerts]]\nurl = "{hook.url}"\noutage_after = "2s"\n',
    )
    daemon = start_daemon(config)
    daemon.poll(lambda: persons(box.db) == 5, "the first contacts captured")
    down_at = time.time()
    box.kill()
    kit.contacts(tmp_path / "contacts.csv", [kit.contact(n) for n in range(5, 8)], header=False)  # work that must wait
    daemon.poll(lambda: _bodies(hook, "outage"), "the outage alert")
    assert daemon.get("/readyz").status_code == 503
    time.sleep(max(down_at + OUTAGE_S - time.time(), 0))  # the outage itself: the API stays down this long
    again = sandbox_process(db=box.db, port=box.port)
    up_at = time.time()  # it answers from now at the latest
    daemon.poll(lambda: persons(again.db) == 8, "every contact captured")
    started, cleared = daemon.poll(
        lambda: len(_bodies(hook, "outage")) == 2 and _bodies(hook, "outage"), "the recovery alert"
    )
    assert started["since"] == cleared["since"]
    assert abs(_at(cleared["since"]) - down_at) <= 2.0, (cleared, down_at)
    assert abs(cleared["duration_s"] - (up_at - down_at)) <= 2.0, (cleared, up_at - down_at)
    assert abs(_at(cleared["ended"]) - up_at) <= 2.0
    assert cleared["summary"].startswith("Delivery resumed after an outage of")
    assert daemon.stop() == 0


def test_after_a_401_only_the_requests_in_flight_are_refused_until_the_credentials_work_again(
    kit,
    gated_sandbox,
    receiver,  # noqa: F811 (the fixture imported above)
    start_daemon,
    tmp_path: Path,
) -> None:
    box, gate = gated_sandbox(faults=Faults(latency_s=0.2))  # requests stay in flight a while
    key, secret = box.create_client(rate_limit=100_000)
    kit.credentials(tmp_path, key, secret)
    hook = receiver()
    rows = [kit.contact(n) for n in range(200)]
    config = configure(kit, tmp_path, box.base_url, rows, f'\n[[alerts]]\nurl = "{hook.url}"\nconditions = ["auth"]\n')
    # the credentials tick would verify the refused pair again: an hour away, only SIGHUP asks
    config.write_text(config.read_text().replace('credentials_check = "every 1s"', 'credentials_check = "every 1h"'))
    daemon = start_daemon(config)
    daemon.poll(lambda: len(box.store.persons()) >= 10, "the first batch captured")
    new_secret = box.store.regenerate_secret(key)
    daemon.poll(lambda: events(daemon.log, "daemon.auth_failed"), "the refusal said")
    page = daemon.poll(
        lambda: "not read since" in (text := daemon.get("/").text) and text, "a source tick that read nothing"
    )
    refused = gate.count("bulk", 401)
    assert 1 <= refused <= CONCURRENCY, gate.answers
    assert gate.count("info", 401) == 0  # no pass verified the unchanged pair again
    assert "the API refuses the credentials since" in page
    [alert] = hook.received()
    assert alert["condition"] == "auth" and alert["counts"]["unsettled"] > 0
    assert alert["details"]["unread"].startswith("signups since ")
    assert (daemon.metrics()("capture_sync_auth_failing")) == 1

    kit.credentials(tmp_path, key, new_secret)
    daemon.proc.send_signal(signal.SIGHUP)
    daemon.poll(lambda: len(box.store.persons()) == 200, "every contact captured under the new secret")
    assert gate.count("bulk", 401) == refused and gate.count("info", 401) == 0
    daemon.poll(lambda: len(hook.received()) == 2, "the auth alert cleared")
    daemon.poll(lambda: "not read since" not in daemon.get("/").text, "the source read again on its tick")
    assert daemon.stop() == 0
