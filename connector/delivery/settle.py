"""Matching bulk result objects to batch members (design 2).

The spec leaves the objects in `successful`, `duplicates` and `failed` undocumented, so each is
located by the strongest evidence it carries: an echoed per-person idempotency_key, an `index`, an
echoed email or phone. Leftover objects settle leftover members by count only when that cannot be
wrong about the state; everything else becomes `unknown`, to be asked again one by one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ..api.models import BulkCaptureResult, PersonCaptureResult
from ..ledger import Member, Outcome

_CATEGORIES = (("captured", "successful"), ("duplicate", "duplicates"), ("failed", "failed"))
_NON_DIGITS = re.compile(r"\D")


class _EchoIndex:
    """Email and phone of each member, parsed only when some object needs them."""

    def __init__(self, members: Sequence[Member]) -> None:
        self._members = members
        self._by: dict[tuple[str, str], list[int]] | None = None

    def find(self, obj: dict[str, Any]) -> int | None:
        if self._by is None:
            self._by = {}
            for pos, m in enumerate(self._members):
                payload = json.loads(m.payload)
                for field, value in _identity(payload):
                    self._by.setdefault((field, value), []).append(pos)
        for field, value in _identity(obj):
            hits = self._by.get((field, value), [])
            if len(hits) == 1:
                return hits[0]
        return None


def _identity(data: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    if isinstance(data.get("email"), str) and data["email"]:
        out.append(("email", data["email"].strip().lower()))
    if isinstance(data.get("phone"), str):
        digits = _NON_DIGITS.sub("", data["phone"])
        if digits:
            out.append(("phone", digits))
    return out


def _locate(obj: Any, members: Sequence[Member], by_key: dict[str, int], echo: _EchoIndex) -> int | None:
    if not isinstance(obj, dict):
        return None
    key = obj.get("idempotency_key")
    if isinstance(key, str) and key in by_key:
        return by_key[key]
    index = obj.get("index")
    if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(members):
        return index
    return echo.find(obj)


def _person_id(obj: dict[str, Any]) -> str | None:
    value = obj.get("person_id", obj.get("id"))
    return value if isinstance(value, str) and value else None


def _error(obj: dict[str, Any]) -> str:
    err = obj.get("error")
    if isinstance(err, dict):
        parts = [str(err[k]) for k in ("code", "message") if err.get(k)]
        if parts:
            return ": ".join(parts)
    if isinstance(err, str) and err:
        return err
    return "the server listed this person as failed without a reason"


def _outcome(member: Member, state: str, obj: dict[str, Any] | None) -> Outcome:
    obj = obj if isinstance(obj, dict) else {}
    if state == "failed":
        return Outcome(member.entry_id, "failed", error=_error(obj))
    return Outcome(member.entry_id, state, person_id=_person_id(obj))  # type: ignore[arg-type]


def match_bulk(members: Sequence[Member], result: BulkCaptureResult) -> list[Outcome]:
    """One outcome per member, in member order; every member ends in exactly one state."""
    by_key = {m.key: pos for pos, m in enumerate(members)}
    echo = _EchoIndex(members)
    assigned: dict[int, tuple[str, Any]] = {}
    contested: set[int] = set()
    leftovers: list[tuple[str, Any]] = []
    for state, attr in _CATEGORIES:
        for obj in getattr(result, attr):
            pos = _locate(obj, members, by_key, echo)
            if pos is None:
                leftovers.append((state, obj))
            elif pos in assigned or pos in contested:
                contested.add(pos)
            else:
                assigned[pos] = (state, obj)
    for pos in contested:
        assigned.pop(pos, None)
    open_positions = [p for p in range(len(members)) if p not in assigned and p not in contested]
    leftover_states = {state for state, _ in leftovers}
    if open_positions and len(leftovers) == len(open_positions) and len(leftover_states) == 1 and not contested:
        # Unambiguous by count: the state is certain, but which object is whose is not, so no
        # person_id is attributed; failures keep a reason only when all of them share it.
        (state,) = leftover_states
        errors = {_error(obj) for _, obj in leftovers if isinstance(obj, dict)}
        shared = {"error": errors.pop()} if len(errors) == 1 else {}
        for pos in open_positions:
            assigned[pos] = (state, shared)
    return [
        _outcome(m, *assigned[pos]) if pos in assigned else Outcome(m.entry_id, "unknown")
        for pos, m in enumerate(members)
    ]


def person_outcome(member: Member, result: PersonCaptureResult) -> Outcome:
    """POST /person creates or updates the canonical person: captured either way."""
    return Outcome(member.entry_id, "captured", person_id=str(result.person_id))
