"""The objects inside a bulk result's `successful`, `duplicates` and `failed` (spec 2.6), per shape.

The spec shows none of their fields, so each `BulkResultShape` (see behaviour.py) is a server that
fills them differently: with request positions counted from 0 or 1, with positions of its own,
with the person echoed flat or nested, or with no evidence of which person an object is about.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .behaviour import BulkResultShape

Kind = Literal["successful", "duplicates", "failed"]
KINDS: tuple[Kind, ...] = ("successful", "duplicates", "failed")
_ECHOED = ("idempotency_key", "email", "phone")


@dataclass(frozen=True, slots=True)
class PersonOutcome:
    """What became of the person at `index` of the request; `raw` is that person as sent.

    `action` is the capture's (created, updated) for `successful`, "duplicate" for `duplicates`;
    `error` ({code, message}) is set for `failed` only, `person_id` for the others only.
    """

    kind: Kind
    index: int
    raw: Any
    person_id: str | None = None
    action: str | None = None
    error: dict[str, str] | None = None


def _outcome_fields(o: PersonOutcome) -> dict[str, Any]:
    """The least an object says: its error if it failed, else the person it went to."""
    return {"error": o.error} if o.kind == "failed" else {"person_id": o.person_id}


def _echo(o: PersonOutcome) -> dict[str, Any]:
    out: dict[str, Any] = {"index": o.index}
    if isinstance(o.raw, dict):
        out.update({k: o.raw[k] for k in _ECHOED if isinstance(o.raw.get(k), str)})
    if o.kind == "successful":
        return {**out, "person_id": o.person_id, "action": o.action, "duplicate_detected": o.action == "updated"}
    if o.kind == "duplicates":
        return {**out, "person_id": o.person_id, "reason": "idempotency_key already captured"}
    return {**out, "person_id": None, "error": o.error}


def _nested(o: PersonOutcome) -> dict[str, Any]:
    if o.kind == "failed":
        return {"input": o.raw, "errors": [o.error]}
    return {"result": {"id": o.person_id, "action": o.action}, "input": o.raw}


def _index1(o: PersonOutcome) -> dict[str, Any]:
    return {"index": o.index + 1, **_outcome_fields(o)}


def _array_index(position: int, o: PersonOutcome) -> dict[str, Any]:
    email = o.raw.get("email") if isinstance(o.raw, dict) else None
    upper = {"email": email.upper()} if isinstance(email, str) else {}
    return {"index": position, **upper, **_outcome_fields(o)}


_IN_REQUEST_ORDER: dict[str, Callable[[PersonOutcome], dict[str, Any]]] = {
    "echo": _echo,
    "nested": _nested,
    "index1": _index1,
    "bare": _outcome_fields,
}


def bulk_result(shape: BulkResultShape, outcomes: Sequence[PersonOutcome]) -> dict[str, list[dict[str, Any]]]:
    """The three arrays, every person in exactly one; request order, but reversed for `array_index`."""
    arrays = {kind: [o for o in outcomes if o.kind == kind] for kind in KINDS}
    if shape == "array_index":
        return {kind: [_array_index(n, o) for n, o in enumerate(reversed(items))] for kind, items in arrays.items()}
    render = _IN_REQUEST_ORDER[shape]
    return {kind: [render(o) for o in items] for kind, items in arrays.items()}
