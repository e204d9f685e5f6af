"""The http source against a real HTTP server on 127.0.0.1: four kinds of pagination, `since`
increments with shared boundary values, the auth header, and 429/5xx answered with retries."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from connector.plugins import build_source
from connector.source import BadRecord, SourceError
from connector.testing import SourceContract

TOKEN = "s3cret-token-value"
PER_PAGE = 2


class ContactsApi:
    """The upstream API's data and the faults to inject, shared with the handler thread."""

    def __init__(self) -> None:
        self.contacts: list[dict[str, Any]] = []
        self.faults: list[int] = []  # status codes for the next requests, one each
        self.requests: list[str] = []
        self.lock = threading.Lock()

    def reset(self, contacts: list[dict[str, Any]]) -> None:
        with self.lock:
            self.contacts, self.faults, self.requests = list(contacts), [], []

    def add(self, *contacts: dict[str, Any]) -> None:
        with self.lock:
            self.contacts.extend(contacts)


def handler_for(api: ContactsApi) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            with api.lock:
                api.requests.append(self.path)
                fault = api.faults.pop(0) if api.faults else None
                rows = [
                    c
                    for c in api.contacts
                    if "since" not in q or not isinstance(c, dict) or c.get("updated", "") >= q["since"]
                ]
            if fault is not None:
                return self.send(fault, {"error": "injected"}, {"Retry-After": "0"} if fault == 429 else None)
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self.send(401, {"error": "unauthorized"})
            if url.path == "/pages":  # ?page=N, an empty page ends the list
                page = int(q.get("page", "1"))
                return self.send(200, rows[(page - 1) * PER_PAGE : page * PER_PAGE])
            start = int(q.get("after", q.get("cursor", "0")))
            chunk, more = rows[start : start + PER_PAGE], start + PER_PAGE < len(rows)
            following = str(start + PER_PAGE) if more else None
            if url.path == "/linked":
                link = f"/linked?after={following}" + (f"&since={q['since']}" if "since" in q else "") if more else None
                return self.send(200, {"items": chunk, "next": link})
            if url.path == "/tokens":
                return self.send(200, {"data": {"items": chunk}, "meta": {"next_cursor": following}})
            if url.path == "/link-header":
                headers = (
                    {"Link": f'<http://{self.headers["Host"]}/link-header?after={following}>; rel="next"'}
                    if more
                    else {}
                )
                return self.send(200, chunk, headers)
            return self.send(404, {"error": "no such path"})

    return Handler


@pytest.fixture(scope="module")
def api() -> Iterator[tuple[ContactsApi, str]]:
    state = ContactsApi()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(state))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield state, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def contacts(api: tuple[ContactsApi, str], monkeypatch: pytest.MonkeyPatch) -> tuple[ContactsApi, str]:
    """The API holding BASE, no faults queued, and the right token in the environment."""
    api[0].reset(BASE)
    monkeypatch.setenv("CONTACTS_TOKEN", TOKEN)
    return api


def contact(i: int, updated: str = "2024-01-01") -> dict[str, Any]:
    return {"id": i, "name": f"Person {i}", "email": f"p{i}@example.com", "updated": updated}


BASE = [
    contact(1, "2024-01-01"),
    contact(2, "2024-01-02"),
    contact(3, "2024-01-02"),
    contact(4, "2024-01-02"),
    contact(5, "2024-01-03"),
]
AUTH = {"auth_env": "CONTACTS_TOKEN", "auth_scheme": "Bearer", "backoff_s": 0.001, "max_backoff_s": 0.01}


class HttpContract(SourceContract):
    source_type = "http"
    path = ""
    extra: dict[str, Any] = {}

    @pytest.fixture
    def source_options(self, contacts: tuple[ContactsApi, str]) -> dict[str, Any]:
        state, base = contacts
        self.api = state
        return {"url": base + self.path, **AUTH, **self.extra}

    def add_records(self, options: dict[str, Any]) -> None:
        self.api.add(contact(6, "2024-01-03"), contact(7, "2024-01-04"))

    def broken_options(self, options: dict[str, Any]) -> dict[str, Any]:
        return {**options, "url": options["url"].split("?")[0] + "-missing"}

    def bad_options(self, options: dict[str, Any]) -> dict[str, Any]:
        no_id = {"name": "No id", "updated": "2024-01-02"}
        self.api.reset([contact(1), "junk", contact(2, "2024-01-02"), no_id, [3], contact(4, "2024-01-03")])
        return options


class TestPageNumbers(HttpContract):
    path = "/pages"
    extra = {"pagination": "page"}

    def invalid_options(self, options: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {**options, "url": "ftp://example.com/x"},
            {**options, "pagination": "scroll"},
            {**options, "since_param": "since"},  # without since_field
            {**options, "page_size": 10},  # without page_size_param
        ]


class TestNextLinkWithSince(HttpContract):
    path = "/linked"
    extra = {"pagination": "next_link", "records_path": "items", "since_param": "since", "since_field": "updated"}


class TestCursorTokens(HttpContract):
    path = "/tokens"
    extra = {"pagination": "cursor", "records_path": "data.items", "next_path": "meta.next_cursor"}


class TestLinkHeader(HttpContract):
    path = "/link-header"
    extra = {"pagination": "link_header"}


def test_429_and_5xx_are_retried_and_the_read_completes(contacts: tuple[ContactsApi, str]) -> None:
    state, base = contacts
    state.faults = [429, 503, 502]
    source = build_source("crm", "http", {"url": base + "/pages", "pagination": "page", **AUTH})
    assert [r.id for r in source.read(None)] == ["1", "2", "3", "4", "5"]
    assert len(state.requests) == 3 + 4  # three refused attempts, then pages 1, 2, 3 and the empty 4


def test_retries_are_bounded_and_the_failure_is_explained(contacts: tuple[ContactsApi, str]) -> None:
    state, base = contacts
    state.faults = [503] * 3
    source = build_source("crm", "http", {"url": base + "/pages?key=abc", **AUTH, "max_attempts": 3})
    with pytest.raises(SourceError, match=r"GET http://127.0.0.1:\d+/pages failed after 3 attempt\(s\): HTTP 503"):
        list(source.read(None))


def test_a_refused_credential_stops_the_read_without_showing_it(
    contacts: tuple[ContactsApi, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _state, base = contacts
    monkeypatch.setenv("CONTACTS_TOKEN", "wrong-token-value")
    source = build_source("crm", "http", {"url": base + "/pages", **AUTH})
    with pytest.raises(SourceError, match="answered HTTP 401") as info:
        source.check()
    assert "wrong-token-value" not in str(info.value)
    monkeypatch.delenv("CONTACTS_TOKEN")
    with pytest.raises(SourceError, match="environment variable CONTACTS_TOKEN is not set"):
        build_source("crm", "http", {"url": base + "/pages", **AUTH}).check()


def test_since_is_sent_from_the_last_value_and_the_boundary_is_read_again(contacts: tuple[ContactsApi, str]) -> None:
    state, base = contacts
    options = {
        "url": base + "/linked",
        "records_path": "items",
        "pagination": "next_link",
        "since_param": "since",
        "since_field": "updated",
        **AUTH,
    }
    first = list(build_source("crm", "http", options).read(None))
    state.contacts[4] = {**contact(5, "2024-01-03"), "name": "edited the same day"}  # its cursor did not move
    state.add(contact(6, "2024-01-03"))
    state.requests.clear()
    again = list(build_source("crm", "http", options).read(first[-1].state))
    assert [(r.id, r.data["name"]) for r in again] == [("5", "edited the same day"), ("6", "Person 6")]
    assert state.requests == ["/linked?since=2024-01-03"]


def test_a_body_without_the_records_path_is_explained(contacts: tuple[ContactsApi, str]) -> None:
    _, base = contacts
    source = build_source("crm", "http", {"url": base + "/tokens", "records_path": "data.rows", **AUTH})
    with pytest.raises(SourceError, match=r"/tokens: `data.rows` is not a list"):
        source.check()


def test_items_without_an_id_or_not_objects_are_bad_records_named_by_page_and_item(
    contacts: tuple[ContactsApi, str],
) -> None:
    state, base = contacts
    state.reset([contact(1), {"name": "no id", "id": ""}, 7, contact(4)])
    items = list(build_source("crm", "http", {"url": base + "/pages", "pagination": "page", **AUTH}).read(None))
    page1, page2 = f"{base}/pages?page=1", f"{base}/pages?page=2"
    assert [r.id for r in items] == ["1", f"{page1}#2", f"{page2}#1", "4"]
    bad = [(r.where, r.reason, r.raw) for r in items if isinstance(r, BadRecord)]
    assert bad == [
        (f"{base}/pages item 2", "no value in 'id'", {"name": "no id", "id": ""}),
        (f"{base}/pages item 1", "not a JSON object", {"item": "7"}),
    ]
