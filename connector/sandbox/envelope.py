"""The spec's envelopes (2.3 success, 7 error) as the sandbox sends them, and request bodies read as
JSON: shared by the Capture API operations (app.py) and the admin endpoint (admin.py), so both
answer in one shape."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from starlette.responses import Response

_NAMES = {
    400: "BadRequestError",
    401: "UnauthorizedError",
    403: "ForbiddenError",
    404: "NotFoundError",
    405: "MethodNotAllowedError",
    409: "IdempotencyConflictError",
    429: "RateLimitError",
    503: "ServiceUnavailableError",
}


class ApiError(Exception):
    """Any refusal; rendered as the spec's error envelope."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        retryable: bool | None = None,
        headers: Mapping[str, str] | None = None,
        details: list[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.retryable, self.headers, self.details = retryable, headers, details


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def json_response(status: int, payload: dict[str, Any], headers: Mapping[str, str] | None = None) -> Response:
    # ASCII escapes: any string the client sent (even a lone surrogate) can be sent back.
    body = json.dumps(payload, separators=(",", ":")).encode("ascii")
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def success(status: int, data: dict[str, Any], message: str) -> dict[str, Any]:
    return {"success": True, "statusCode": status, "timestamp": _now(), "message": message, "data": data}


def error_envelope(err: ApiError) -> dict[str, Any]:
    error: dict[str, Any] = {
        "name": _NAMES.get(err.status, "Error"),
        "message": err.message,
        "statusCode": err.status,
        "code": err.code,
        "isOperational": True,
    }
    if err.retryable is not None:
        error["retryable"] = err.retryable
    if err.details:
        error["details"] = err.details
    return {"success": False, "statusCode": err.status, "timestamp": _now(), "error": error}


def error_response(err: ApiError) -> Response:
    return json_response(err.status, error_envelope(err), err.headers)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(raw: bytes) -> Any:
    """A request body; NaN and Infinity are not JSON, and refused like any other bad body."""
    try:
        return json.loads(raw, parse_constant=_no_constants)
    except (ValueError, RecursionError):
        raise ApiError(400, "invalid_json", "the body is not valid JSON") from None
