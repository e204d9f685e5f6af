"""Reading bulk answers for the flow: the matcher's view of each result object (step 6), and whether
a repeated request captured anyone again (steps 4, 5). The placing itself is `match_bulk`'s, through
`read_bulk`: the flow reports what the connector would do, never a second opinion of its own."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..api import BulkCaptureResult, encode_json
from ..delivery import ObjectReading, read_bulk
from ..ledger import Member, Outcome

_KINDS = {
    "key": "per-person key",
    "email": "email",
    "phone": "phone",
    "index": "index",
    "person_id": "person_id",
    "id": "id",
    "error": "error",
}


def members(persons: Sequence[dict[str, Any]]) -> list[Member]:
    """The persons of one request as the matcher sees batch members: position, per-person key, payload."""
    return [Member(pos, str(p.get("idempotency_key", "")), encode_json(p).decode()) for pos, p in enumerate(persons)]


def counts(result: BulkCaptureResult) -> str:
    return f"{len(result.successful)} successful, {len(result.duplicates)} duplicates, {len(result.failed)} failed"


def repeat_verdict(first: BulkCaptureResult, again: BulkCaptureResult) -> tuple[bool, str]:
    """Did the same request again (same key, same bytes) capture nobody twice? A replay flag, the very
    same answer, or nobody in `successful` says so; new objects in `successful` say it captured again."""
    if (again.model_extra or {}).get("idempotent_replay") is True:
        return True, f"idempotent_replay true, {counts(again)}: the earlier result replayed"
    if _arrays(again) == _arrays(first):
        return True, "the same answer as the first time (no replay flag): nobody captured twice"
    if not again.successful:
        return True, f"{counts(again)}: nobody captured again"
    return False, (
        f"{counts(again)}, no replay flag and not the first answer: the server captured again under a "
        "repeated Idempotency-Key, so a retry after a lost response would double every person in it"
    )


def _arrays(result: BulkCaptureResult) -> str:
    return json.dumps([result.successful, result.duplicates, result.failed], sort_keys=True)


@dataclass(frozen=True, slots=True)
class Reading:
    """Step 6's report on one answer: the matcher's outcome per person and a line per object."""

    outcomes: list[Outcome]
    lines: list[str]
    summary: str

    @property
    def placed(self) -> int:
        return sum(o.state != "unknown" for o in self.outcomes)


def read(persons: Sequence[dict[str, Any]], result: BulkCaptureResult, labels: Sequence[str]) -> Reading:
    outcomes, objects, base = read_bulk(members(persons), result)
    lines = [_object_line(r, outcomes, labels) for r in objects]
    for label, outcome in zip(labels, outcomes, strict=True):
        detail = (
            f" ({outcome.error})" if outcome.error else f" (person_id {outcome.person_id})" if outcome.person_id else ""
        )
        lines.append(f"{label}: {outcome.state}{detail}")
    kinds = dict.fromkeys(_KINDS[k] for r in objects for k in r.evidence if k != "error")
    nested = any(k != "error" for r in objects for k in r.nested)
    carry = ", ".join(kinds) or "nothing that names a person"
    placed = sum(o.state != "unknown" for o in outcomes)
    by_evidence = len({r.member for r in objects if r.member is not None and outcomes[r.member].state != "unknown"})
    how = f" ({by_evidence} by their own evidence, {placed - by_evidence} by count)" if placed > by_evidence else ""
    summary = (
        f"{placed} of {len(persons)} persons placed{how}; the objects carry "
        f"{carry}{' (in nested objects)' if nested else ''}; {_numbering(objects, base)}"
    )
    return Reading(outcomes, lines, summary)


def _object_line(r: ObjectReading, outcomes: list[Outcome], labels: Sequence[str]) -> str:
    kinds = [
        (f"index {','.join(map(str, r.indices))}" if k == "index" else _KINDS[k])
        + (" (nested)" if k in r.nested and k != "error" else "")
        for k in r.evidence
    ]
    if r.member is not None and outcomes[r.member].state != "unknown":
        where = f"placed on {labels[r.member]}"
    else:
        where = "not placed by its own evidence"
    return f"{r.array}[{r.slot}]: {', '.join(kinds) or 'no evidence'} -> {where}"


def _numbering(objects: list[ObjectReading], base: int | None) -> str:
    indexed = [r for r in objects if r.indices]
    if not indexed:
        return "no index"
    if base is not None:
        return f"the index counts request positions from {base}"
    if all(r.indices in ((r.slot,), (r.slot + 1,)) for r in indexed):
        return "the index reads as a position in its own array (not relied on as a request position)"
    return "the indices are no consistent numbering of the request (not relied on)"
