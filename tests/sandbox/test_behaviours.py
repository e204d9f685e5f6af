"""The sandbox's switchable behaviours, over real loopback sockets: each is one legal server for a
point the spec leaves open (behaviour.py), and each must do exactly what it says."""

from __future__ import annotations

import sqlite3
from typing import Any

import httpx
import pytest

from connector.sandbox import Behaviour, Faults, SandboxStore

FIRST = [{"name": "Ada", "email": "ada@example.org", "idempotency_key": "p-ada"}]
MIXED = [
    {"name": "New", "email": "new@example.org", "idempotency_key": "p-new"},
    {"name": "Ada again", "email": "ada@example.org", "idempotency_key": "p-ada"},  # key captured by FIRST
    {"name": "No contact"},  # rule B broken
    {"first_name": "Phone", "phone": "+44 20 7946 0000", "idempotency_key": "p-phone"},
    {"name": "Bad", "email": "not-an-address", "idempotency_key": "p-bad"},  # invalid email
]


class _Text:
    """Equal to any non-empty string: error messages are prose, their codes are the contract."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and bool(other)


TEXT = _Text()
RULE_B = {"code": "email_or_phone_required", "message": TEXT}
BAD_EMAIL = {"code": "invalid_email", "message": TEXT}


def expected(shape: str, ada: str, new: str, phone: str) -> dict[str, list[dict[str, Any]]]:
    """The three arrays for MIXED after FIRST, in each shape; person ids by per-person key."""
    return {
        "echo": {
            "successful": [
                {
                    "index": 0,
                    "idempotency_key": "p-new",
                    "email": "new@example.org",
                    "person_id": new,
                    "action": "created",
                    "duplicate_detected": False,
                },
                {
                    "index": 3,
                    "idempotency_key": "p-phone",
                    "phone": "+44 20 7946 0000",
                    "person_id": phone,
                    "action": "created",
                    "duplicate_detected": False,
                },
            ],
            "duplicates": [
                {
                    "index": 1,
                    "idempotency_key": "p-ada",
                    "email": "ada@example.org",
                    "person_id": ada,
                    "reason": "idempotency_key already captured",
                },
            ],
            "failed": [
                {"index": 2, "person_id": None, "error": RULE_B},
                {
                    "index": 4,
                    "idempotency_key": "p-bad",
                    "email": "not-an-address",
                    "person_id": None,
                    "error": BAD_EMAIL,
                },
            ],
        },
        "nested": {
            "successful": [
                {"result": {"id": new, "action": "created"}, "input": MIXED[0]},
                {"result": {"id": phone, "action": "created"}, "input": MIXED[3]},
            ],
            "duplicates": [{"result": {"id": ada, "action": "duplicate"}, "input": MIXED[1]}],
            "failed": [{"input": MIXED[2], "errors": [RULE_B]}, {"input": MIXED[4], "errors": [BAD_EMAIL]}],
        },
        "index1": {
            "successful": [{"index": 1, "person_id": new}, {"index": 4, "person_id": phone}],
            "duplicates": [{"index": 2, "person_id": ada}],
            "failed": [{"index": 3, "error": RULE_B}, {"index": 5, "error": BAD_EMAIL}],
        },
        "array_index": {
            "successful": [
                {"index": 0, "person_id": phone},
                {"index": 1, "email": "NEW@EXAMPLE.ORG", "person_id": new},
            ],
            "duplicates": [{"index": 0, "email": "ADA@EXAMPLE.ORG", "person_id": ada}],
            "failed": [{"index": 0, "email": "NOT-AN-ADDRESS", "error": BAD_EMAIL}, {"index": 1, "error": RULE_B}],
        },
        "bare": {
            "successful": [{"person_id": new}, {"person_id": phone}],
            "duplicates": [{"person_id": ada}],
            "failed": [{"error": RULE_B}, {"error": BAD_EMAIL}],
        },
    }[shape]


def connect(box: Any) -> httpx.Client:
    key, secret = box.create_client(rate_limit=1000)
    return httpx.Client(base_url=box.base_url, headers=box.headers(key, secret))


def bulk(http: httpx.Client, persons: list[Any], key: str) -> httpx.Response:
    return http.post("/persons/bulk", json={"persons": persons}, headers={"Idempotency-Key": key})


def person(http: httpx.Client, body: dict[str, Any], key: str) -> httpx.Response:
    return http.post("/person", json=body, headers={"Idempotency-Key": key})


def arrays(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    return {k: data[k] for k in ("successful", "duplicates", "failed")}


# -- bulk result shapes (spec 2.6) ------------------------------------------------------------


@pytest.mark.parametrize("shape", ["echo", "nested", "index1", "array_index", "bare"])
def test_each_shape_lists_every_person_once_in_exactly_that_shape(sandbox_factory, shape):
    box = sandbox_factory(behaviour=Behaviour(bulk_result_shape=shape))
    with connect(box) as http:
        bulk(http, FIRST, "b-1")
        response = bulk(http, MIXED, "b-2")
        replay = bulk(http, MIXED, "b-2")
    ids = {c["person_key"]: c["person_id"] for c in box.store.captures()}
    assert set(ids) == {"p-ada", "p-new", "p-phone"}  # the duplicate and the invalid ones were not captured
    assert arrays(response) == expected(shape, ids["p-ada"], ids["p-new"], ids["p-phone"])
    assert arrays(replay) == arrays(response) and replay.json()["data"]["idempotent_replay"] is True


def test_behaviour_values_outside_the_choices_are_refused():
    with pytest.raises(ValueError, match="bulk_result_shape"):
        Behaviour(bulk_result_shape="flat")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="idempotency_scope"):
        Behaviour(idempotency_scope="global")  # type: ignore[arg-type]


# -- invalid persons (spec 4.3) ---------------------------------------------------------------


def test_reject_request_refuses_a_bulk_with_an_invalid_person_whole_and_captures_nothing(sandbox_factory):
    box = sandbox_factory(behaviour=Behaviour(invalid_person="reject-request"))
    with connect(box) as http:
        refused = bulk(http, MIXED, "b-1")
        valid = bulk(http, [MIXED[0], MIXED[3]], "b-2")
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert (refused.json()["success"], error["statusCode"], error["code"]) == (False, 400, "email_or_phone_required")
    assert any("persons.2" in d for d in error["details"]) and any("persons.4" in d for d in error["details"])
    assert [c["request_key"] for c in box.store.captures()] == ["b-2", "b-2"]
    assert box.store.idempotency_state(http.headers["X-API-Key"], "bulk", "b-1") is None
    assert len(arrays(valid)["successful"]) == 2


# -- idempotency scope (spec 4.4) -------------------------------------------------------------


@pytest.mark.parametrize(("scope", "captures"), [("shared", 2), ("operation", 4)])
def test_a_shared_scope_makes_keys_of_both_capture_operations_one_namespace(sandbox_factory, scope, captures):
    box = sandbox_factory(behaviour=Behaviour(idempotency_scope=scope))
    with connect(box) as http:
        in_bulk = arrays(bulk(http, [{"name": "A", "email": "a@example.org", "idempotency_key": "k-a"}], "b-1"))
        one = person(http, {"name": "A", "email": "a@example.org"}, "k-a").json()["data"]
        solo = person(http, {"name": "S", "email": "s@example.org"}, "k-s").json()["data"]
        later = arrays(bulk(http, [{"name": "S", "email": "s@example.org", "idempotency_key": "k-s"}], "b-2"))
    bulk_id = in_bulk["successful"][0]["person_id"]
    assert one["person_id"] == bulk_id and solo["idempotent_replay"] is False
    assert len(box.store.captures()) == captures
    if scope == "shared":
        assert one["idempotent_replay"] is True
        assert [d["person_id"] for d in later["duplicates"]] == [solo["person_id"]] and later["successful"] == []
    else:
        assert one["idempotent_replay"] is False and one["action"] == "updated"
        assert later["duplicates"] == [] and later["successful"][0]["action"] == "updated"


# -- refused persons (Faults.p_person_fail) ---------------------------------------------------

VALID = [{"name": f"P{i}", "email": f"p{i}@example.org", "idempotency_key": f"k-{i}"} for i in range(20)]


def test_refused_persons_are_failed_uncaptured_and_a_retry_replays_the_same_result(sandbox_factory):
    box = sandbox_factory(faults=Faults(p_person_fail=0.5, seed=11))
    with connect(box) as http:
        first = arrays(bulk(http, VALID, "b-1"))
        retry = bulk(http, VALID, "b-1")
    refused = {o["index"] for o in first["failed"]}
    assert 0 < len(refused) < len(VALID) and first["duplicates"] == []
    assert {o["error"]["code"] for o in first["failed"]} == {"person_refused"}
    assert refused.isdisjoint(o["index"] for o in first["successful"])
    assert len(refused) + len(first["successful"]) == len(VALID)
    assert {c["person_key"] for c in box.store.captures()} == {f"k-{o['index']}" for o in first["successful"]}
    assert arrays(retry) == first and retry.json()["data"]["idempotent_replay"] is True
    assert len(box.store.captures()) == len(first["successful"])


def test_a_refused_single_person_is_a_400_and_its_retry_meets_the_same_refusal(sandbox_factory):
    box = sandbox_factory(faults=Faults(p_person_fail=1.0))
    with connect(box) as http:
        responses = [person(http, {"name": "P", "email": "p@example.org"}, "k-1") for _ in range(2)]
        state = box.store.idempotency_state(http.headers["X-API-Key"], "person", "k-1")
    assert [r.status_code for r in responses] == [400, 400]
    assert responses[0].json()["error"]["code"] == "person_refused"
    assert state == "done" and responses[1].json() == responses[0].json()  # stored, then replayed
    assert box.store.captures() == []


def test_refusals_do_not_apply_when_invalid_persons_reject_the_request(sandbox_factory):
    box = sandbox_factory(faults=Faults(p_person_fail=1.0), behaviour=Behaviour(invalid_person="reject-request"))
    with connect(box) as http:
        result = arrays(bulk(http, VALID, "b-1"))
    assert len(result["successful"]) == len(VALID) and result["failed"] == []


# -- what each capture wrote ------------------------------------------------------------------


def test_captures_keep_the_fields_they_wrote_in_capture_order(sandbox):
    with connect(sandbox) as http:
        person(http, {"name": "Ada", "email": "ada@example.org", "company": "Old"}, "k-1")
        bulk(http, [{"name": "Ada", "email": "ada@example.org", "company": "New", "idempotency_key": "p"}], "b-1")
    assert [c["data"] for c in sandbox.store.captures()] == [
        {"name": "Ada", "email": "ada@example.org", "company": "Old"},
        {"name": "Ada", "email": "ada@example.org", "company": "New"},
    ]
    assert sandbox.store.persons()[0]["data"]["company"] == "New"


def test_a_database_from_before_capture_data_gains_the_column_and_keeps_its_rows(tmp_path):
    db = tmp_path / "old.sqlite3"
    with sqlite3.connect(db) as old:
        old.execute(
            "CREATE TABLE captures (id INTEGER PRIMARY KEY, client TEXT NOT NULL, operation TEXT NOT NULL, "
            "request_key TEXT NOT NULL, person_key TEXT, person_id TEXT NOT NULL, identity TEXT NOT NULL, "
            "action TEXT NOT NULL, at REAL NOT NULL)"
        )
        old.execute("INSERT INTO captures VALUES (1, 'c', 'person', 'k', NULL, 'p', 'email:a@b.org', 'created', 0)")
    old.close()
    SandboxStore(db).close()
    with SandboxStore(db) as store:  # opening it again changes nothing
        [row] = store.captures()
    assert (row["identity"], row["data"]) == ("email:a@b.org", None)
