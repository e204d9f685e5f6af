"""Contact data is masked in logs above DEBUG, and what only looks like it (an address the daemon
listens on, a date) stays readable."""

from __future__ import annotations

import io
import logging

import pytest

from connector import logs
from connector.ledger import Member, Outcome
from connector.logs import mask_pii, redact_pii


@pytest.mark.parametrize(
    "phone", ["+1 415 555 0104", "(415) 555-0104", "415.555.0104", "+44 20 7946 0958", "0612.345678"]
)
def test_phone_numbers_are_masked(phone: str) -> None:
    masked = mask_pii(f"refused {phone} today")
    assert "<phone>" in masked and not any(ch.isdigit() for ch in masked)


def test_emails_are_masked() -> None:
    assert mask_pii("ada.lovelace+crm@example.org was refused") == "<email> was refused"


@pytest.mark.parametrize(
    "text",
    [
        "serving on http://127.0.0.1:9464/metrics",
        "sandbox at 10.20.30.40:8765",
        "last pass 2026-11-24 04:25:21",
        "since 2026-11-24T04:25:21Z",
        "after a 429: rate_limit counts requests per 123.456 s",  # ratelimit.learned's window
        "per 86399.125 s (a token bucket, refilled at 1388.889 per s)",
    ],
)
def test_addresses_dates_and_decimals_are_not_taken_for_phones(text: str) -> None:
    assert mask_pii(text) == text


def test_names_are_masked_by_their_key_at_any_depth_below_debug() -> None:
    event = {
        "event": "refused",
        "name": "Ada Lovelace",
        "record": {"first_name": "Ada", "last_name": "Lovelace"},
        "people": [{"name": "Grace Hopper", "company": "Navy"}],
        "source": "signups",
    }
    assert redact_pii(None, "info", dict(event)) == {
        "event": "refused",
        "name": "<redacted>",
        "record": {"first_name": "<redacted>", "last_name": "<redacted>"},
        "people": [{"name": "<redacted>", "company": "Navy"}],
        "source": "signups",
    }
    assert redact_pii(None, "debug", dict(event)) == event


def test_a_ledger_member_in_a_log_field_is_logged_masked_not_raised() -> None:
    """`Member` and `Outcome` are named tuples, whose constructor takes fields one by one: rebuilt as a
    plain tuple is, a log call holding one raised (review R12). They are rendered by their repr, masked."""
    root = logging.getLogger()
    saved_level, saved_handlers = root.level, list(root.handlers)  # structlog: put back by a fixture of conftest
    buf = io.StringIO()
    try:
        logs.configure("DEBUG", json=True, stream=buf)
        log = logs.get_logger("connector.tests.members")
        log.debug("probe", member=Member(1, "k", '{"email":"ann@example.org"}'))
        log.info("probe", outcomes=[Outcome(1, "failed", error="ann@example.org is invalid")])
    finally:
        for handler in root.handlers[:]:
            if handler not in saved_handlers:
                root.removeHandler(handler)
        root.setLevel(saved_level)
    last = buf.getvalue().splitlines()[-1]
    assert "Outcome(" in last and "ann@example.org" not in last
