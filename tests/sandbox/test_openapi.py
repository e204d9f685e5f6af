"""The served OpenAPI document says what spec section 9 requires, and only that."""

from __future__ import annotations

import re

import email_validator
import httpx
import pytest
from pydantic import ValidationError

from connector.api.models import PersonInput

HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


@pytest.fixture
def document(sandbox) -> dict:
    response = httpx.get(sandbox.base_url + "/openapi.json")
    assert response.status_code == 200
    return response.json()


def test_openapi_31_version_100_with_exactly_the_three_operations(document):
    assert document["openapi"].startswith("3.1") and document["info"]["version"] == "1.0.0"
    operations = {
        (method.upper(), path) for path, item in document["paths"].items() for method in item if method in HTTP_METHODS
    }
    assert operations == {("GET", "/info"), ("POST", "/person"), ("POST", "/persons/bulk")}


def test_each_operation_is_supported_public_secured_and_documents_its_responses(document):
    schemes = document["components"]["securitySchemes"]
    assert {(s["in"], s["name"]) for s in schemes.values()} == {("header", "X-API-Key"), ("header", "X-API-Secret")}
    expected = {
        ("get", "/info"): {"200", "401", "429", "503"},
        ("post", "/person"): {"201", "400", "401", "409", "429", "503"},
        ("post", "/persons/bulk"): {"200", "400", "401", "409", "429", "503"},
    }
    for (method, path), statuses in expected.items():
        op = document["paths"][path][method]
        assert op["x-supported"] is True and op["x-public"] is True
        assert op["security"] == [{name: [] for name in schemes}]
        assert set(op["responses"]) == statuses
        assert "Retry-After" in op["responses"]["429"]["headers"]


def test_captures_declare_the_idempotency_key_header_with_its_limits(document):
    param = document["components"]["parameters"]["IdempotencyKey"]
    assert (param["in"], param["name"], param["required"]) == ("header", "Idempotency-Key", True)
    assert (param["schema"]["minLength"], param["schema"]["maxLength"]) == (1, 512)
    for path in ("/person", "/persons/bulk"):
        assert document["paths"][path]["post"]["parameters"] == [{"$ref": "#/components/parameters/IdempotencyKey"}]
        assert document["paths"][path]["post"]["requestBody"]["required"] is True


def test_person_schema_states_the_fields_rules_and_no_nulls(document):
    schema = document["components"]["schemas"]["PersonInput"]
    assert set(schema["properties"]) == set(PersonInput.model_fields)
    assert schema["additionalProperties"] is False
    assert all("anyOf" not in prop for prop in schema["properties"].values())
    assert schema["properties"]["email"]["format"] == "email"
    required_sets = [[alt["required"] for alt in rule["anyOf"]] for rule in schema["allOf"]]
    assert required_sets == [[["name"], ["first_name"]], [["email"], ["phone"]]]
    bulk = document["components"]["schemas"]["BulkBody"]["properties"]["persons"]
    assert (bulk["minItems"], bulk["maxItems"]) == (1, 100)


@pytest.mark.parametrize("tld", [*email_validator.SPECIAL_USE_DOMAIN_NAMES, "com", "org", "example", "internal"])
def test_the_served_email_pattern_and_the_validator_agree_on_reserved_domains(document, tld):
    pattern = document["components"]["schemas"]["PersonInput"]["properties"]["email"]["pattern"]
    for address in (f"ada@mail.{tld}", f"ada@{tld}.{tld}"):
        try:
            PersonInput(name="Ada", email=address)
            accepted = True
        except ValidationError:
            accepted = False
        assert (re.search(pattern, address) is not None) == accepted, address
