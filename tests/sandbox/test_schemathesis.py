"""schemathesis against the served OpenAPI document: a real server on loopback, valid credentials.

Every operation is fuzzed with schema-valid data (each response documented and conforming, valid
data accepted) and, where it has inputs, with schema-invalid data (refused). One deliberate
difference: POST /persons/bulk processes each person independently, so a structurally valid batch
with invalid persons is a 200 that lists exactly those persons in `failed`; for that operation the
generic "invalid data is rejected" check is replaced by that stronger one, judged by the served
schema itself. schemathesis' lazy pytest loader does not run under this pytest, so the operations'
strategies are driven by hypothesis directly.
"""

from __future__ import annotations

import uuid
from typing import Any

import hypothesis
import jsonschema_rs
import pytest
import schemathesis
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import negative_data_rejection

from connector.api.models import MAX_BULK_PERSONS, MAX_KEY_LENGTH

MAX_EXAMPLES = 40
CASES = [
    ("GET /info", GenerationMode.POSITIVE),
    ("POST /person", GenerationMode.POSITIVE),
    ("POST /person", GenerationMode.NEGATIVE),
    ("POST /persons/bulk", GenerationMode.POSITIVE),
    ("POST /persons/bulk", GenerationMode.NEGATIVE),
]


def check_bulk_outcome(document: dict[str, Any], case: Any, response: Any) -> None:
    """A structurally valid batch is a 200 whose `failed` holds exactly the schema-invalid persons."""
    person_schema = document["components"]["schemas"]["BulkPersonInput"]
    is_valid_person = jsonschema_rs.validator_for(person_schema, validate_formats=True).is_valid
    body, key = case.body, (case.headers or {}).get("Idempotency-Key")
    structural = (
        isinstance(body, dict)
        and set(body) == {"persons"}
        and isinstance(body["persons"], list)
        and 1 <= len(body["persons"]) <= MAX_BULK_PERSONS
        and isinstance(key, str)
        and 1 <= len(key) <= MAX_KEY_LENGTH
    )
    if not structural:
        assert response.status_code == 400, response.text
        return
    if response.status_code == 409:  # a generated key met again with another body: documented, fine
        return
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    failed = {o["index"] for o in data["failed"]}
    accepted = {o["index"] for o in data["successful"] + data["duplicates"]}
    expected_failed = {i for i, p in enumerate(body["persons"]) if not is_valid_person(p)}
    assert failed == expected_failed
    assert accepted == set(range(len(body["persons"]))) - expected_failed


@pytest.mark.parametrize(("label", "mode"), CASES, ids=[f"{label}-{mode}" for label, mode in CASES])
def test_the_served_api_conforms_to_its_own_document(sandbox, label, mode):
    key, secret = sandbox.create_client(name="schemathesis", rate_limit=100_000)
    credentials = sandbox.headers(key, secret)
    schema = schemathesis.openapi.from_url(sandbox.base_url + "/openapi.json")
    schema.config.update(base_url=sandbox.base_url)
    schema.config.generation.update(with_security_parameters=False)
    method, path = label.split(" ")
    operation = schema[path][method]
    bulk_negative = path == "/persons/bulk" and mode == GenerationMode.NEGATIVE

    @hypothesis.given(operation.as_strategy(generation_mode=mode))
    @hypothesis.settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    def conforms(case):
        headers = dict(credentials)
        if mode == GenerationMode.POSITIVE:
            # Generated keys repeat across examples with other bodies (a correct 409): a fresh key
            # per example makes every valid request one the API must accept.
            headers["Idempotency-Key"] = uuid.uuid4().hex
        excluded = [negative_data_rejection] if bulk_negative else None
        response = case.call_and_validate(headers=headers, excluded_checks=excluded)
        if bulk_negative:
            check_bulk_outcome(schema.raw_schema, case, response)

    conforms()
