"""The sandbox's admin endpoint: a running sandbox's faults, read and changed without a restart,
so an operator can rehearse an outage against a daemon that keeps running (`sandbox faults`).

`GET /admin/faults` says the faults in force, `PATCH` changes the fields it is given (the others
stay), `DELETE` clears them all. Only a client on this machine (loopback; 403 otherwise) holding
the token `sandbox serve` wrote when it started (`Authorization: Bearer ...`, compared in constant
time; 401 otherwise) is answered; a refused request changes nothing. Answers use the spec's
envelopes; an impossible set of faults is a 400 naming the rule it breaks, and the old set stays.
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from pydantic import ValidationError
from starlette.responses import Response

from ..api.models import explain
from ..loopback import is_loopback
from .admin_access import ADMIN_PATH
from .envelope import ApiError, json_response, parse_json, success
from .fault_settings import FaultSettings
from .faults import Faults

log = logging.getLogger("capture_sync.sandbox")


class LiveFaults:
    """The faults a running sandbox answers with. A change replaces the whole `Faults` in one
    assignment; a request reads `faults` once when it starts and keeps that set to its end, so none
    meets half of a change (the 503 of the old set and the latency of the new)."""

    def __init__(self, faults: Faults) -> None:
        self.faults = faults


def _admitted(request: Request, token: str) -> None:
    host = request.client.host if request.client else ""
    if not is_loopback(host.removeprefix("::ffff:")):  # an IPv4 client of a dual-stack socket
        raise ApiError(403, "admin_loopback_only", "the admin endpoint answers clients on the sandbox's machine only")
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        raise ApiError(
            401,
            "missing_admin_token",
            "send the sandbox's admin token as Authorization: Bearer TOKEN",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise ApiError(
            401, "invalid_admin_token", "the admin token is not this sandbox's", headers={"WWW-Authenticate": "Bearer"}
        )


def _answer(settings: FaultSettings, message: str) -> Response:
    return json_response(200, success(200, {"faults": settings.model_dump()}, message))


def _changed(live: LiveFaults, faults: Faults) -> Response:
    live.faults = faults
    settings = FaultSettings.of(faults)
    log.warning("sandbox.faults_changed: %s", json.dumps(settings.model_dump(), separators=(",", ":")))
    return _answer(settings, "faults changed")


def _patched(current: Faults, body: Any) -> Faults:
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_body", "the body must be a JSON object of fault settings")
    try:
        settings = FaultSettings.model_validate({**FaultSettings.of(current).model_dump(), **body})
    except ValidationError as exc:
        messages = explain(exc)
        raise ApiError(400, "invalid_faults", "; ".join(messages), details=messages) from None
    return current.replaced(**settings.fault_fields())


def install_admin(app: FastAPI, live: LiveFaults, token: str) -> None:
    """Add the admin endpoint to `app`, opened by `token`."""

    @app.get(ADMIN_PATH, include_in_schema=False)
    async def show(request: Request) -> Response:
        _admitted(request, token)
        return _answer(FaultSettings.of(live.faults), "faults in force")

    @app.patch(ADMIN_PATH, include_in_schema=False)
    async def change(request: Request) -> Response:
        _admitted(request, token)
        return _changed(live, _patched(live.faults, parse_json(await request.body())))

    @app.delete(ADMIN_PATH, include_in_schema=False)
    async def clear(request: Request) -> Response:
        _admitted(request, token)
        return _changed(live, Faults())
