"""The sandbox over real loopback sockets: every rule of the spec the sandbox must honour."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from connector.api import BulkCaptureResult, CaptureClient, ErrorEnvelope, PersonCaptureResult, SuccessEnvelope
from connector.api.models import ClientInfo
from connector.sandbox import Faults


def error_of(response: httpx.Response) -> dict:
    """The error object of a documented error envelope (fails the test if it is not one)."""
    envelope = ErrorEnvelope.model_validate_json(response.content)
    assert envelope.statusCode == response.status_code == envelope.error.statusCode
    assert response.headers["content-type"] == "application/json"
    return envelope.error.model_dump()


@pytest.fixture
def client(sandbox):
    key, secret = sandbox.create_client(name="crm-sync", rate_limit=1000, default_lead_source="web")
    with httpx.Client(base_url=sandbox.base_url, headers=sandbox.headers(key, secret)) as http:
        http.api_key = key  # type: ignore[attr-defined]
        yield http


def post_person(http: httpx.Client, body, key: str = "k-1") -> httpx.Response:
    return http.post("/person", json=body, headers={"Idempotency-Key": key})


def post_bulk(http: httpx.Client, persons, key: str = "b-1") -> httpx.Response:
    return http.post("/persons/bulk", json={"persons": persons}, headers={"Idempotency-Key": key})


# -- info and authentication ------------------------------------------------------------------


def test_info_returns_the_client_settings_and_never_the_secret(sandbox, client):
    response = client.get("/info")
    assert response.status_code == 200
    info = SuccessEnvelope[ClientInfo].model_validate_json(response.content).data
    assert (info.client_name, info.rate_limit, info.default_lead_source) == ("crm-sync", 1000, "web")
    assert client.headers["X-API-Secret"] not in response.text


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-API-Key": "ck_nobody", "X-API-Secret": "whatever"},
    ],
    ids=["missing", "unknown-key"],
)
def test_missing_or_unknown_credentials_get_401(sandbox, headers):
    response = httpx.get(sandbox.base_url + "/info", headers=headers)
    assert response.status_code == 401
    assert error_of(response)["code"] in ("missing_credentials", "invalid_credentials")


def test_wrong_secret_and_inactive_client_get_401_and_the_secret_is_not_echoed(sandbox):
    key, secret = sandbox.create_client()
    wrong = httpx.get(sandbox.base_url + "/info", headers=sandbox.headers(key, secret + "x"))
    assert wrong.status_code == 401 and secret not in wrong.text
    sandbox.store.set_active(key, False)
    inactive = httpx.get(sandbox.base_url + "/info", headers=sandbox.headers(key, secret))
    assert inactive.status_code == 401 and error_of(inactive)["code"] == "invalid_credentials"
    sandbox.store.set_active(key, True)
    assert httpx.get(sandbox.base_url + "/info", headers=sandbox.headers(key, secret)).status_code == 200


def test_regenerating_the_secret_stops_the_old_one_at_once(sandbox):
    key, old = sandbox.create_client()
    with httpx.Client(base_url=sandbox.base_url) as http:
        assert http.get("/info", headers=sandbox.headers(key, old)).status_code == 200
        new = sandbox.store.regenerate_secret(key)
        assert http.get("/info", headers=sandbox.headers(key, old)).status_code == 401
        assert http.get("/info", headers=sandbox.headers(key, new)).status_code == 200


def test_only_a_salted_hash_of_the_secret_is_stored(sandbox):
    key, secret = sandbox.create_client()
    raw = b"".join(p.read_bytes() for p in sandbox.store.db_path.parent.glob(sandbox.store.db_path.name + "*"))
    assert key.encode() in raw and secret.encode() not in raw


# -- routing ----------------------------------------------------------------------------------


def test_unknown_paths_and_methods_get_error_envelopes(client):
    not_found = client.get("/persons")
    assert not_found.status_code == 404 and error_of(not_found)["code"] == "not_found"
    wrong_method = client.delete("/person")
    assert wrong_method.status_code == 405 and error_of(wrong_method)["code"] == "method_not_allowed"
    assert client.post("/info").status_code == 405


# -- validation -------------------------------------------------------------------------------

PERSON = {"name": "Ada Lovelace", "email": "ada@example.org"}


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", "invalid_json"),
        (b"[1, 2]", "invalid_body"),
        ({**PERSON, "nickname": "A"}, "unknown_property"),
        ({"last_name": "L", "email": "l@example.org"}, "name_required"),
        ({"name": "N"}, "email_or_phone_required"),
        ({"name": "N", "email": "not-an-address"}, "invalid_email"),
        ({"name": "", "email": "n@example.org"}, "empty_field"),
        ({"name": None, "first_name": "F", "email": "n@example.org"}, "null_field"),
    ],
)
def test_invalid_person_bodies_get_400_with_a_specific_code(client, body, code):
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = client.post("/person", content=content, headers={"Idempotency-Key": "v-1"})
    assert response.status_code == 400
    assert error_of(response)["code"] == code


@pytest.mark.parametrize(("count", "code"), [(0, "too_few_persons"), (101, "too_many_persons")])
def test_bulk_needs_1_to_100_persons(sandbox, client, count, code):
    persons = [{"name": f"P{i}", "email": f"p{i}@example.org"} for i in range(count)]
    response = post_bulk(client, persons)
    assert response.status_code == 400 and error_of(response)["code"] == code
    assert sandbox.store.persons() == []


def test_bulk_with_an_unknown_top_level_property_is_refused_whole(client):
    response = client.post(
        "/persons/bulk", json={"persons": [PERSON, {"name": "B"}], "dry_run": True}, headers={"Idempotency-Key": "b-x"}
    )
    assert response.status_code == 400 and error_of(response)["code"] == "unknown_property"


@pytest.mark.parametrize(
    ("key", "code"),
    [
        (None, "missing_idempotency_key"),
        ("", "invalid_idempotency_key"),
        ("k" * 513, "invalid_idempotency_key"),
    ],
)
@pytest.mark.parametrize("path", ["/person", "/persons/bulk"])
def test_idempotency_key_must_be_present_and_1_to_512_chars(sandbox, client, path, key, code):
    body = PERSON if path == "/person" else {"persons": [PERSON]}
    headers = {} if key is None else {"Idempotency-Key": key}
    response = client.post(path, json=body, headers=headers)
    assert response.status_code == 400 and error_of(response)["code"] == code
    assert sandbox.store.persons() == []


def test_a_512_character_key_is_accepted(client):
    assert post_person(client, PERSON, key="k" * 512).status_code == 201


# -- canonical persons ------------------------------------------------------------------------


def test_a_second_capture_of_the_same_email_updates_the_same_person(sandbox, client):
    first = PersonCaptureResult.model_validate(post_person(client, PERSON, "k-1").json()["data"])
    second_response = post_person(client, {"first_name": "Ada", "email": "ADA@Example.org", "company": "AE"}, "k-2")
    second = PersonCaptureResult.model_validate(second_response.json()["data"])
    assert second_response.status_code == 201
    assert (first.action, first.duplicate_detected, first.status) == ("created", False, "captured")
    assert (second.action, second.duplicate_detected) == ("updated", True)
    assert second.person_id == first.person_id
    [person] = sandbox.store.persons()
    assert person["data"]["company"] == "AE" and person["data"]["name"] == "Ada Lovelace"
    assert person["lead_source"] == "web"


def test_without_email_the_phone_digits_are_the_identity(sandbox, client):
    a = post_person(client, {"name": "Bob", "phone": "+1 (555) 010-0199"}, "k-a").json()["data"]
    b = post_person(client, {"name": "Bob", "phone": "15550100199"}, "k-b").json()["data"]
    c = post_person(client, {"name": "Bob", "phone": "15550100200"}, "k-c").json()["data"]
    assert a["person_id"] == b["person_id"] != c["person_id"]
    assert len(sandbox.store.persons()) == 2


# -- bulk -------------------------------------------------------------------------------------


def test_bulk_processes_each_person_independently(sandbox, client):
    persons = [
        {"name": "A", "email": "a@example.org", "idempotency_key": "pa"},
        {"name": "B"},  # rule B broken
        {"name": "C", "email": "c@example.org", "idempotency_key": "pc", "age": 3},  # unknown property
        {"first_name": "D", "phone": "+44 20 7946 0000"},
        "not an object",
    ]
    response = post_bulk(client, persons)
    assert response.status_code == 200
    result = BulkCaptureResult.model_validate(response.json()["data"])
    assert [o["index"] for o in result.successful] == [0, 3]
    assert result.successful[0]["idempotency_key"] == "pa" and "idempotency_key" not in result.successful[1]
    assert result.duplicates == []
    assert {o["index"]: o["error"]["code"] for o in result.failed} == {
        1: "email_or_phone_required",
        2: "unknown_property",
        4: "invalid_body",
    }
    assert result.failed[1]["idempotency_key"] == "pc"
    assert all(o["error"]["message"] for o in result.failed)
    stored = {p["id"] for p in sandbox.store.persons()}
    assert stored == {o["person_id"] for o in result.successful}


def test_a_person_key_already_captured_goes_to_duplicates_and_is_not_captured_again(sandbox, client):
    first = post_bulk(client, [{"name": "A", "email": "a@example.org", "idempotency_key": "pa"}], "b-1")
    pid = first.json()["data"]["successful"][0]["person_id"]
    second = post_bulk(
        client,
        [
            {"name": "A2", "email": "a@example.org", "idempotency_key": "pa"},
            {"name": "E", "email": "e@example.org", "idempotency_key": "pe"},
            {"name": "E again", "email": "e@example.org", "idempotency_key": "pe"},
        ],
        "b-2",
    ).json()["data"]
    assert [(o["index"], o["idempotency_key"], o["person_id"]) for o in second["duplicates"]] == [
        (0, "pa", pid),
        (2, "pe", second["successful"][0]["person_id"]),
    ]
    assert [o["index"] for o in second["successful"]] == [1]
    assert sandbox.store.capture_counts_by_person_key() == {(client.api_key, "pa"): 1, (client.api_key, "pe"): 1}
    assert {p["data"]["name"] for p in sandbox.store.persons()} == {"A", "E"}


def test_per_person_keys_are_per_client(sandbox, client):
    other_key, other_secret = sandbox.create_client(name="other")
    person = [{"name": "A", "email": "a@example.org", "idempotency_key": "pa"}]
    post_bulk(client, person)
    with httpx.Client(base_url=sandbox.base_url, headers=sandbox.headers(other_key, other_secret)) as other:
        data = post_bulk(other, person).json()["data"]
    assert len(data["successful"]) == 1 and data["successful"][0]["action"] == "updated"


# -- request idempotency ----------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/person", "/persons/bulk"])
def test_same_key_and_body_replays_the_stored_response_without_capturing_again(sandbox, client, path):
    body = PERSON if path == "/person" else {"persons": [PERSON]}
    first = client.post(path, json=body, headers={"Idempotency-Key": "same"})
    again = client.post(path, json=body, headers={"Idempotency-Key": "same"})
    assert again.status_code == first.status_code
    assert first.json()["data"]["idempotent_replay"] is False
    assert again.json()["data"]["idempotent_replay"] is True and again.json()["idempotent_replay"] is True
    strip = lambda d: {k: v for k, v in d.items() if k != "idempotent_replay"}  # noqa: E731
    assert strip(again.json()["data"]) == strip(first.json()["data"])
    assert len(sandbox.store.captures()) == 1


def test_same_key_with_another_body_is_409_and_captures_nothing(sandbox, client):
    assert post_person(client, PERSON, "same").status_code == 201
    conflict = post_person(client, {**PERSON, "company": "X"}, "same")
    assert conflict.status_code == 409 and error_of(conflict)["code"] == "idempotency_key_reused"
    assert len(sandbox.store.captures()) == 1


def test_keys_are_per_operation_and_per_client(sandbox, client):
    assert post_person(client, PERSON, "shared").status_code == 201
    assert post_bulk(client, [PERSON], "shared").status_code == 200
    key, secret = sandbox.create_client(name="second")
    with httpx.Client(base_url=sandbox.base_url, headers=sandbox.headers(key, secret)) as other:
        assert post_person(other, PERSON, "shared").json()["data"]["idempotent_replay"] is False
    assert len(sandbox.store.captures()) == 3


def test_same_key_while_the_first_request_runs_is_409(sandbox_factory):
    box = sandbox_factory(faults=Faults(latency_s=1.0))
    key, secret = box.create_client()
    url, headers = box.base_url + "/person", box.headers(key, secret, "slow")
    first: list[httpx.Response] = []
    runner = threading.Thread(target=lambda: first.append(httpx.post(url, json=PERSON, headers=headers)))
    runner.start()
    try:
        with httpx.Client() as http:
            # Wait for the first request to hold the key (observed in the store, not guessed by time).
            while box.store.idempotency_state(key, "person", "slow") != "running":
                assert runner.is_alive(), "the first request ended before it was observed running"
                threading.Event().wait(0.01)
            second = http.post(url, json=PERSON, headers=headers)
    finally:
        runner.join()
    assert second.status_code == 409 and error_of(second)["code"] == "idempotency_key_in_progress"
    assert first[0].status_code == 201
    assert len(box.store.captures()) == 1


# -- rate limit -------------------------------------------------------------------------------


def test_over_the_rate_limit_is_429_with_retry_after(sandbox):
    key, secret = sandbox.create_client(rate_limit=3)
    with httpx.Client(base_url=sandbox.base_url, headers=sandbox.headers(key, secret)) as http:
        assert [http.get("/info").status_code for _ in range(3)] == [200, 200, 200]
        limited = http.get("/info")
        assert post_person(http, PERSON).status_code == 429
    assert limited.status_code == 429 and error_of(limited)["code"] == "rate_limited"
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    assert sandbox.store.persons() == []


# -- faults and failures ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("faults", "retryable"),
    [
        (Faults(p_retryable_503=1.0), True),
        (Faults(p_fatal_503=1.0), False),
    ],
)
def test_injected_outages_are_503_envelopes_that_capture_nothing(sandbox_factory, faults, retryable):
    box = sandbox_factory(faults=faults)
    key, secret = box.create_client()
    response = httpx.post(box.base_url + "/person", json=PERSON, headers=box.headers(key, secret, "k"))
    assert response.status_code == 503 and error_of(response)["retryable"] is retryable
    assert box.store.persons() == []
    assert box.store.idempotency_state(key, "person", "k") is None


def test_commit_then_drop_loses_the_response_but_not_the_capture(sandbox_factory):
    box = sandbox_factory(faults=Faults(p_commit_drop=1.0, seed=1))
    key, secret = box.create_client()
    with httpx.Client(base_url=box.base_url, headers=box.headers(key, secret, "b-drop")) as http:
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
            http.post("/persons/bulk", json={"persons": [PERSON]})
        assert len(box.store.persons()) == 1
        retry = http.post("/persons/bulk", json={"persons": [PERSON]})
    assert retry.status_code == 200 and retry.json()["data"]["idempotent_replay"] is True
    assert retry.json()["data"]["successful"][0]["person_id"] == box.store.persons()[0]["id"]
    assert len(box.store.captures()) == 1


def test_an_unexpected_failure_is_a_503_envelope_not_a_500_page(sandbox_factory):
    box = sandbox_factory()
    key, secret = box.create_client()
    box.store.close()  # the storage fails under the running server
    response = httpx.get(box.base_url + "/info", headers=box.headers(key, secret))
    assert response.status_code == 503
    assert error_of(response)["code"] == "internal_error"


async def test_the_sandbox_serves_the_projects_own_api_client(sandbox):
    key, secret = sandbox.create_client(name="via-client", rate_limit=50)

    async with CaptureClient(sandbox.base_url, key, secret) as api:
        info = await api.info()
        one = await api.capture_person({"name": "Z", "email": "z@example.org"}, "c-1")
        bulk = await api.capture_bulk([{"name": "Y", "phone": "+1 555 0100", "idempotency_key": "py"}], "c-2")
    assert info.client_name == "via-client" and info.rate_limit == 50
    assert one.action == "created" and bulk.successful[0]["idempotency_key"] == "py"
