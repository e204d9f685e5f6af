"""Every response of the flow, kept as the server sent it, and checked against the spec's envelopes.

CaptureClient turns a response into its `data` (or an exception) and drops the envelope around it;
the flow must judge the envelope too (spec 2.3 and 7), so a transport in front of the real one keeps
each response. It keeps the method, the path and the response only: never the request, whose
headers carry the secret.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError

from ..api import BulkCaptureResult, ClientInfo, ErrorEnvelope, PersonCaptureResult, SuccessEnvelope, explain

_SUCCESS: dict[str, type[BaseModel]] = {  # path suffix -> the success envelope of that operation
    "/info": SuccessEnvelope[ClientInfo],
    "/person": SuccessEnvelope[PersonCaptureResult],
    "/persons/bulk": SuccessEnvelope[BulkCaptureResult],
}


# RFC 3339 date-time, the format JSON Schema's "date-time" names (spec 2.3 and 7: timestamp).
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})")


@dataclass(frozen=True, slots=True)
class Exchange:
    """One response as the server sent it, with the method and path that asked for it (never the
    request's headers: they carry the secret)."""

    method: str
    path: str
    response: httpx.Response

    @property
    def label(self) -> str:
        operation = next((suffix for suffix in _SUCCESS if self.path.endswith(suffix)), self.path)
        return f"{self.method} {operation} {self.response.status_code}"


class Recorder(httpx.AsyncBaseTransport):
    """An httpx transport that sends through `inner` and keeps every response it returns."""

    def __init__(self, inner: httpx.AsyncBaseTransport | None = None) -> None:
        # The real transport verifies TLS with the system's CA bundle, as CaptureClient's own does.
        self._inner = inner or httpx.AsyncHTTPTransport(verify=httpx.create_ssl_context())
        self.exchanges: list[Exchange] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        # The client reads this very object; its `content` is there once the call returns.
        self.exchanges.append(Exchange(request.method, request.url.path, response))
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()

    def last_status(self) -> int | None:
        return self.exchanges[-1].response.status_code if self.exchanges else None


def envelope_problem(exchange: Exchange) -> str | None:
    """What is wrong with one response's envelope (spec 2.3 for 2xx, 7 otherwise), or None."""
    response = exchange.response
    status = response.status_code
    try:
        body = response.content
    except httpx.ResponseNotRead:
        return f"{exchange.label}: the body could not be read"
    kind = response.headers.get("content-type", "")
    if not kind.startswith("application/json"):
        return f"{exchange.label}: Content-Type {kind or '(none)'}, not application/json"
    ok = 200 <= status < 300
    model = _SUCCESS.get(next((s for s in _SUCCESS if exchange.path.endswith(s)), ""), SuccessEnvelope[Any])
    try:  # strict: "200" is no integer and "true" no boolean, whatever a lenient client would make of them
        envelope = (model if ok else ErrorEnvelope).model_validate_json(body, strict=True)
    except ValidationError as exc:
        which = "success envelope (spec 2.3)" if ok else "error envelope (spec 7)"
        return f"{exchange.label}: not the {which}: {'; '.join(explain(exc))}"
    raw = json.loads(body)
    if raw.get("success") is not ok:  # 1 == True in Python: the Literal alone would take it
        return f"{exchange.label}: success is {json.dumps(raw.get('success'))}, not {json.dumps(ok)}"
    if not isinstance(raw.get("timestamp"), str) or not _DATE_TIME.fullmatch(raw["timestamp"]):
        return f"{exchange.label}: timestamp {json.dumps(raw.get('timestamp'))} is not an RFC 3339 date-time"
    codes = [getattr(envelope, "statusCode")]  # noqa: B009  (typed as BaseModel: mypy sees no field)
    if isinstance(envelope, ErrorEnvelope):
        codes.append(envelope.error.statusCode)
    if any(code != status for code in codes):
        return f"{exchange.label}: statusCode {'/'.join(map(str, codes))} differs from the HTTP status"
    return None
