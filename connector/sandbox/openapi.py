"""The served OpenAPI 3.1 document, generated from connector/api/models.py so it cannot drift.

pydantic renders optional fields as `string | null`; the API treats an explicit null as an error
(models.PersonInput), so the request schemas drop the nulls, state rules A and B as `anyOf`
requirements and declare `email` with the format and the domain rule the validator enforces.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import email_validator
from pydantic import ValidationError
from pydantic.json_schema import models_json_schema

from ..api.models import (
    MAX_KEY_LENGTH,
    BulkBody,
    BulkCaptureResult,
    ClientInfo,
    ErrorEnvelope,
    PersonCaptureResult,
    PersonInput,
    SuccessEnvelope,
)

PREFIX = "/api/v1/capture"
REF = "#/components/schemas/{model}"


def _refused_domains() -> list[str]:
    """The reserved names (RFC 6761 and kin) the API's email check refuses, asked of the check itself."""
    refused = []
    for name in email_validator.SPECIAL_USE_DOMAIN_NAMES:
        try:
            PersonInput(name="n", email=f"a@b.{name}")
        except ValidationError:
            refused.append(name)
    return refused


# Generic email generators produce reserved domains the validator refuses; the schema says so too,
# so that exactly the schema-valid addresses are accepted.
EMAIL_PATTERN = r"^[^@]+@(?!(?:[^@]*\.)?(?:" + "|".join(map(re.escape, _refused_domains())) + r")$)[^@]+$"

_RULES = [
    {"anyOf": [{"required": ["name"]}, {"required": ["first_name"]}]},
    {"anyOf": [{"required": ["email"]}, {"required": ["phone"]}]},
]

_ERRORS = {
    400: "The request, idempotency key or person data is invalid (see error.code).",
    401: "API key or secret missing, invalid or inactive.",
    409: "An earlier request with this idempotency key has another body or is still running.",
    429: "The client exceeded its rate_limit in the current window; see Retry-After.",
    503: "Capture temporarily unavailable; retry only when error.retryable is true, with the same key.",
}


def _request_schema(schema: dict[str, Any]) -> dict[str, Any]:
    properties = {}
    for name, prop in schema["properties"].items():
        prop = dict(prop)
        variants = [v for v in prop.pop("anyOf", []) if v.get("type") != "null"]
        if variants:
            prop.update(variants[0])
        prop.pop("default", None)
        if name == "email":
            prop.update(format="email", pattern=EMAIL_PATTERN)
        properties[name] = prop
    return {**schema, "properties": properties, "allOf": _RULES}


def _response(description: str, schema: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": REF.format(model=schema)}}},
    }
    if headers:
        out["headers"] = headers
    return out


def _errors(*statuses: int) -> dict[str, Any]:
    out = {}
    for status in statuses:
        headers = None
        if status == 429:
            headers = {
                "Retry-After": {
                    "description": "Seconds until the window frees.",
                    "schema": {"type": "integer", "minimum": 1},
                }
            }
        out[str(status)] = _response(_ERRORS[status], "ErrorEnvelope", headers)
    return out


def _operation(op_id: str, summary: str, responses: dict[str, Any], body: str | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {
        "operationId": op_id,
        "summary": summary,
        "security": [{"ApiKey": [], "ApiSecret": []}],
        "x-supported": True,
        "x-public": True,
        "responses": responses,
    }
    if body is not None:
        op["parameters"] = [{"$ref": "#/components/parameters/IdempotencyKey"}]
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": REF.format(model=body)}}},
        }
    return op


@cache
def openapi_document() -> dict[str, Any]:
    _, defs = models_json_schema(
        [
            (BulkBody, "validation"),
            (PersonInput, "validation"),
            (SuccessEnvelope[ClientInfo], "serialization"),
            (SuccessEnvelope[PersonCaptureResult], "serialization"),
            (SuccessEnvelope[BulkCaptureResult], "serialization"),
            (ErrorEnvelope, "serialization"),
        ],
        ref_template=REF,
    )
    schemas = defs["$defs"]
    for name in ("PersonInput", "BulkPersonInput"):
        schemas[name] = _request_schema(schemas[name])
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Capture API (capture-sync sandbox)",
            "version": "1.0.0",
            "description": "Create or update canonical persons from a server-side integration.",
        },
        "servers": [{"url": PREFIX}],
        "paths": {
            "/info": {
                "get": _operation(
                    "getInfo",
                    "The calling client's settings",
                    {"200": _response("Client info.", "SuccessEnvelope_ClientInfo_"), **_errors(401, 429, 503)},
                )
            },
            "/person": {
                "post": _operation(
                    "capturePerson",
                    "Capture one person",
                    {
                        "201": _response(
                            "Captured, or an earlier result under this key reused (data.idempotent_replay).",
                            "SuccessEnvelope_PersonCaptureResult_",
                        ),
                        **_errors(400, 401, 409, 429, 503),
                    },
                    body="PersonInput",
                )
            },
            "/persons/bulk": {
                "post": _operation(
                    "capturePersonsBulk",
                    "Capture up to 100 persons, each independently (invalid ones are listed in `failed`)",
                    {
                        "200": _response(
                            "The batch completed; inspect successful, duplicates and failed.",
                            "SuccessEnvelope_BulkCaptureResult_",
                        ),
                        **_errors(400, 401, 409, 429, 503),
                    },
                    body="BulkBody",
                )
            },
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "ApiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "ApiSecret": {"type": "apiKey", "in": "header", "name": "X-API-Secret"},
            },
            "parameters": {
                "IdempotencyKey": {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": True,
                    "description": "Reuse only to retry the same logical request.",
                    "schema": {"type": "string", "minLength": 1, "maxLength": MAX_KEY_LENGTH},
                },
            },
        },
    }
