"""The sandbox Capture API as an ASGI app: the three operations of the spec, and beside them (with
an admin token) the endpoint that changes its faults while it runs (admin.py).

Order of checks for every request: route (404/405), credentials (401; every request under the
`refuse_credentials` fault), the client's rate window (429), an injected 503 or 429, then for
captures the Idempotency-Key header and the body (400), the idempotency record (replay or 409), and
last the captures, committed with their response. A request reads the faults once, when it starts.

What is a whole-request 400 on POST /persons/bulk, and what is a per-person failure: the body must
be JSON, an object with only `persons`, an array of 1 to 100 items, or the request is refused as a
whole. Inside that array each person is processed independently: one that is not an object, has
an unknown property, breaks rule A or B, has a bad email or an over-long idempotency_key is listed
in `failed` with an error {code, message} and the others are captured (unless the behaviour's
`invalid_person` is `reject-request`: then any such person refuses the whole request).
Where the spec is silent the answer is a `Behaviour` (behaviour.py); the bulk result objects are
shaped by results.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ..api.encoding import persons_in
from ..api.models import MAX_KEY_LENGTH, BulkBody, BulkPersonInput, PersonInput, explain
from .admin import LiveFaults, install_admin
from .behaviour import Behaviour, BulkResultShape
from .envelope import ApiError, error_envelope, error_response, json_response, parse_json, success
from .faults import Faults
from .openapi import PREFIX, openapi_document
from .ratelimit import rate_counter
from .results import PersonOutcome, bulk_result
from .store import Captured, CaptureSession, Client, Operation, SandboxStore

Work = Callable[[CaptureSession], tuple[int, dict[str, Any]]]  # a request's (status, envelope)


def _code(err: ErrorDetails) -> str:
    """The error.code of one pydantic error (the first problem names the request's code)."""
    kind = err["type"]
    if kind == "rules":
        return "name_required" if "name" in err["msg"] else "email_or_phone_required"
    if kind in ("too_short", "too_long") and err["loc"] == ("persons",):
        return "too_few_persons" if kind == "too_short" else "too_many_persons"
    if kind in ("model_type", "dict_type", "model_attributes_type") and not err["loc"]:
        return "invalid_body"
    return {
        "extra_forbidden": "unknown_property",
        "email": "invalid_email",
        "null_field": "null_field",
        "missing": "missing_field",
        "string_too_short": "empty_field",
        "string_too_long": "field_too_long",
    }.get(kind, "invalid_field")


def _is_per_person(err: ErrorDetails) -> bool:
    return len(err["loc"]) > 1 and err["loc"][0] == "persons"


def _invalid(exc: ValidationError) -> ApiError:
    """400 naming every problem; the code is the first problem of the request as a whole, if any."""
    messages = explain(exc)
    errors = exc.errors()
    first = next((e for e in errors if not _is_per_person(e)), errors[0])
    return ApiError(400, _code(first), "; ".join(messages), details=messages)


def _validate(model: type[BaseModel], data: Any) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _invalid(exc) from None


def _body_hash(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _idempotency_key(request: Request) -> str:
    key = request.headers.get("idempotency-key")
    if key is None:
        raise ApiError(400, "missing_idempotency_key", "the Idempotency-Key header is required")
    if not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise ApiError(400, "invalid_idempotency_key", f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} characters")
    return key


class _DropAfterCommit(Response):
    """Announce a response, then close the connection without its body: the outcome is lost.

    uvicorn closes the connection because the app returned mid-response, and says so at ERROR;
    `_QuietDrops` keeps that deliberate case out of the log.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"4096")],
            }
        )


class _QuietDrops(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "ASGI callable returned without completing response."


_QUIET_DROPS = _QuietDrops()


_REFUSED = ApiError(400, "person_refused", "the CRM refused this person")
_WRONG_CREDENTIALS = ApiError(401, "invalid_credentials", "the API key or secret is wrong, or the client is inactive")


def _person_result(done: Captured) -> dict[str, Any]:
    data = {
        "person_id": done.person_id,
        "status": "captured",
        "action": done.action,
        "duplicate_detected": done.action == "updated",
        "idempotent_replay": False,
    }
    return success(201, data, "person captured")


def _capture_one(
    session: CaptureSession, person: PersonInput, person_key: str | None, refuse: Callable[[], bool]
) -> tuple[int, dict[str, Any]]:
    """POST /person; `person_key` (shared idempotency scope only) may name an earlier capture."""
    earlier = session.earlier_capture(person_key) if person_key else None
    if earlier is not None:
        return 201, _replayed(_person_result(earlier))
    if refuse():
        return 400, error_envelope(_REFUSED)
    return 201, _person_result(session.capture(person, person_key))


def _bulk_persons(data: Any, reject_invalid: bool) -> list[BulkPersonInput | ApiError]:
    """Each person validated on its own; a structural problem of the body refuses the whole
    request, and so does any invalid person when `reject_invalid`."""
    try:
        return list(BulkBody.model_validate(data).persons)
    except ValidationError as exc:
        if reject_invalid or not all(_is_per_person(e) for e in exc.errors()):
            raise _invalid(exc) from None
    out: list[BulkPersonInput | ApiError] = []
    for raw in data["persons"]:
        try:
            out.append(BulkPersonInput.model_validate(raw))
        except ValidationError as exc:
            out.append(_invalid(exc))
    return out


def _bulk_outcome(
    session: CaptureSession, index: int, raw: Any, person: BulkPersonInput | ApiError, refuse: Callable[[], bool]
) -> PersonOutcome:
    """One person of a bulk request: invalid, a duplicate of its key's earlier capture, refused, or captured."""
    if not isinstance(person, ApiError):
        person_key = person.idempotency_key or None
        earlier = session.earlier_capture(person_key) if person_key else None
        if earlier is not None:
            return PersonOutcome("duplicates", index, raw, earlier.person_id, "duplicate")
        if not refuse():
            done = session.capture(person, person_key)
            return PersonOutcome("successful", index, raw, done.person_id, done.action)
        person = _REFUSED
    return PersonOutcome("failed", index, raw, error={"code": person.code, "message": person.message})


def _capture_bulk(
    session: CaptureSession,
    raw_persons: list[Any],
    persons: list[BulkPersonInput | ApiError],
    refuse: Callable[[], bool],
    shape: BulkResultShape,
) -> tuple[int, dict[str, Any]]:
    outcomes = [
        _bulk_outcome(session, index, raw, person, refuse)
        for index, (raw, person) in enumerate(zip(raw_persons, persons, strict=True))
    ]
    data = {**bulk_result(shape, outcomes), "idempotent_replay": False}
    return 200, success(200, data, "batch completed")


def _never() -> bool:
    return False


def _replayed(envelope: dict[str, Any]) -> dict[str, Any]:
    """A stored response sent again; an error envelope (a refused person) is sent as it was."""
    if "data" not in envelope:
        return envelope
    return {
        **envelope,
        "message": "idempotent replay of an earlier result",
        "idempotent_replay": True,
        "data": {**envelope["data"], "idempotent_replay": True},
    }


def _injected(faults: Faults) -> ApiError | None:
    """The 503 or 429 this request meets by the faults' draw, if any."""
    kind = faults.outage()
    if kind == "throttled":
        return ApiError(
            429,
            "rate_limited",
            "the client exceeded its request limit",
            headers={"Retry-After": str(faults.retry_after_s)},
        )
    if kind is not None:
        return ApiError(
            503,
            "capture_unavailable" if kind == "retryable" else "capture_failed",
            "capture is temporarily unavailable" if kind == "retryable" else "capture failed",
            retryable=kind == "retryable",
        )
    return None


def create_app(
    store_or_db_path: SandboxStore | str | Path,
    faults: Faults | None = None,
    rate_window_s: float = 60.0,
    behaviour: Behaviour | None = None,
    admin_token: str | None = None,
) -> FastAPI:
    """The sandbox API over `store_or_db_path`; claims left running by a dead server are dropped.
    With `admin_token`, also the admin endpoint that changes its faults while it runs (admin.py)."""
    store = store_or_db_path if isinstance(store_or_db_path, SandboxStore) else SandboxStore(store_or_db_path)
    live = LiveFaults(faults or Faults())
    behaviour = behaviour or Behaviour()
    reject_invalid = behaviour.invalid_person == "reject-request"
    shared_keys = behaviour.idempotency_scope == "shared"
    request_scoped = behaviour.person_key_scope == "request"
    window = rate_counter(behaviour.rate_counting, rate_window_s)
    store.release_all_running()
    # Dropped commits may be switched on at any time (admin.py); adding the filter twice is a no-op.
    logging.getLogger("uvicorn.error").addFilter(_QUIET_DROPS)
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    app.state.store, app.state.faults = store, live
    if admin_token is not None:
        install_admin(app, live, admin_token)

    by_persons = behaviour.rate_limit_unit == "persons"

    def authorised(request: Request, faults: Faults, persons: int = 1) -> Client:
        if faults.refuse_credentials:
            raise _WRONG_CREDENTIALS
        key, secret = request.headers.get("x-api-key"), request.headers.get("x-api-secret")
        if not key or not secret:
            raise ApiError(401, "missing_credentials", "both X-API-Key and X-API-Secret are required")
        client = store.authenticate(key, secret)
        if client is None:
            raise _WRONG_CREDENTIALS
        wait = window.admit(client.api_key, client.rate_limit, cost=persons if by_persons else 1)
        if wait is not None:
            counted = f"{client.rate_limit} {behaviour.rate_limit_unit}"
            raise ApiError(
                429,
                "rate_limited",
                f"more than {counted} at once, refilled over {window.window_s:g} s"
                if behaviour.rate_counting == "bucket"
                else f"more than {counted} in {window.window_s:g} s ({behaviour.rate_counting} window)",
                headers={"Retry-After": str(wait)} if behaviour.retry_after else None,
            )
        refusal = _injected(faults)
        if refusal is not None:
            raise refusal
        return client

    async def delay(faults: Faults) -> None:
        seconds = faults.delay_s()
        if seconds:
            await asyncio.sleep(seconds)

    async def once(client: Client, faults: Faults, operation: Operation, key: str, data: Any, work: Work) -> Response:
        """Run `work` at most once per (client, operation, key); later calls get its stored response."""
        claim = store.claim(client.api_key, operation, key, _body_hash(data))
        if claim.state == "conflict":
            raise ApiError(409, "idempotency_key_reused", "this Idempotency-Key was first used with another body")
        if claim.state == "running":
            raise ApiError(409, "idempotency_key_in_progress", "a request with this Idempotency-Key is still running")
        if claim.state == "replay" and not (faults.no_person_replay and operation == "person"):
            assert claim.status_code is not None and claim.response is not None
            return json_response(claim.status_code, _replayed(claim.response))
        try:
            await delay(faults)
            with store.capture_session(client, operation, key, request_scoped=request_scoped) as session:
                status, envelope = work(session)
                session.finish(status, envelope)
        except BaseException:
            store.release(client.api_key, operation, key)
            raise
        if faults.drop_after_commit():
            return _DropAfterCommit()
        return json_response(status, envelope)

    @app.get(PREFIX + "/openapi.json", include_in_schema=False)
    async def openapi() -> Response:
        return json_response(200, openapi_document())

    @app.get(PREFIX + "/info")
    async def info(request: Request) -> Response:
        faults = live.faults  # read once: this request keeps this set, whatever changes meanwhile
        client = authorised(request, faults)
        await delay(faults)
        data = {
            "client_name": client.name,
            "rate_limit": client.rate_limit,
            "default_lead_source": client.default_lead_source,
            "has_custom_field_mapping": False,
            "allowed_origins": None,
        }
        return json_response(200, success(200, data, "client settings"))

    @app.post(PREFIX + "/person")
    async def person(request: Request) -> Response:
        faults = live.faults
        client = authorised(request, faults)
        key = _idempotency_key(request)
        data = parse_json(await request.body())
        body: PersonInput = _validate(PersonInput, data)
        person_key = key if shared_keys else None
        return await once(
            client, faults, "person", key, data, lambda s: _capture_one(s, body, person_key, faults.refuse_person)
        )

    @app.post(PREFIX + "/persons/bulk")
    async def bulk(request: Request) -> Response:
        faults = live.faults
        raw = await request.body()
        client = authorised(request, faults, persons_in(raw) if by_persons else 1)
        key = _idempotency_key(request)
        data = parse_json(raw)
        persons = _bulk_persons(data, reject_invalid)
        refuse = _never if reject_invalid else faults.refuse_person
        return await once(
            client,
            faults,
            "bulk",
            key,
            data,
            lambda s: _capture_bulk(s, data["persons"], persons, refuse, behaviour.bulk_result_shape),
        )

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> Response:
        return error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        message = {404: "no such operation", 405: "method not allowed on this operation"}.get(
            exc.status_code, str(exc.detail)
        )
        return error_response(ApiError(exc.status_code, code, message, headers=exc.headers))

    @app.exception_handler(RequestValidationError)
    async def _request_invalid(_: Request, exc: RequestValidationError) -> Response:
        return error_response(ApiError(400, "invalid_request", "the request is invalid"))

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> Response:
        return error_response(ApiError(503, "internal_error", "unexpected server failure", retryable=True))

    return app
