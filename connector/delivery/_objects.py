"""What a bulk result object's fields say (the names the matcher reads as evidence), the outcome an
object placed on a member settles it with, and the shortcut for the common answer: objects of plain
values, each echoing one member's per-person key (settle.py holds the full reading).

The shortcut settles each member exactly as the full reading does when it applies, and declines
(None) at the first object it cannot vouch for: one with a nested object or list, one with no key or
with two members' keys, an echoed email or phone not spelled as the keyed member's own, two objects
for one member, or a member left without one. Such an answer's objects line up one per member by
their own evidence, so the full reading settles each member by its object, without the batch-wide
checks; the shortcut gets there without building the reading's per-object records (a third of the
matching's CPU on the sandbox's echo shape). tests/delivery/test_settle_fast_paths.py holds it equal
to the full reading over generated answers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, cast

from ..api.models import BulkCaptureResult
from ..ledger import Member, Outcome
from ._identities import Identities

Settled = Literal["captured", "duplicate", "failed"]
CATEGORIES: tuple[tuple[Settled, str], ...] = (
    ("captured", "successful"),
    ("duplicate", "duplicates"),
    ("failed", "failed"),
)
MAX_DEPTH = 4  # result objects are small; this bounds the walk through a hostile one
TEXT_FIELDS = {
    "email": "email",
    "email_address": "email",
    "phone": "phone",
    "phone_number": "phone",
    "mobile": "phone",
    "person_id": "person_id",
    "id": "id",
}
INDEX_FIELDS = frozenset({"index", "idx", "input_index", "request_index", "person_index"})
ERROR_FIELDS = ("error", "errors", "message", "reason")
ERROR_NAMES = frozenset(ERROR_FIELDS)
FAILED = "the server listed this person as failed"
_NO_REASON = f"{FAILED} without a reason"


def settled(
    member: Member, state: Settled, person_ids: Sequence[str], ids: Sequence[str], errors: Sequence[Any]
) -> Outcome:
    """The outcome of `member`, placed on an object in `state`'s array with these pieces of evidence."""
    if state == "failed":
        return Outcome(member.entry_id, "failed", error=reason(errors))
    person_id, named = _person_id(person_ids, ids)
    return Outcome(member.entry_id, state, person_id=person_id, named_person=named)


def _person_id(person_ids: Sequence[str], ids: Sequence[str]) -> tuple[str | None, bool]:
    """The object's `person_id`, else its `id` (none when it carries two different ones), and whether
    it was named as a person_id."""
    values = person_ids or ids
    if not values or (len(values) > 1 and len(set(values)) > 1):
        return None, False
    return values[0], values is person_ids


def reason(errors: Sequence[Any]) -> str:
    """What an object's error fields say, each text once, in document order."""
    return "; ".join(dict.fromkeys(t for v in errors for t in _texts(v))) or _NO_REASON


def _texts(value: Any, depth: int = 0) -> list[str]:
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if depth >= MAX_DEPTH:
        return []
    if isinstance(value, dict):
        head = [str(value[k]) for k in ("code", "message") if value.get(k) not in (None, "")]
        if head:
            return [": ".join(head)]
        return [t for k in ERROR_FIELDS if k in value for t in _texts(value[k], depth + 1)]
    if isinstance(value, list):
        return [t for item in value for t in _texts(item, depth + 1)]
    return []


def keyed_flat(
    members: Sequence[Member], result: BulkCaptureResult, by_key: dict[str, int], identities: Identities
) -> list[Outcome] | None:
    """One outcome per member, in member order, when every object is flat and keyed (see the module's
    docstring); else None, and the full reading decides. An index beside a key moves nothing: the key
    is exact, and the objects line up one per member."""
    outcomes: list[Outcome | None] = [None] * len(members)
    for state, array in CATEGORIES:
        for obj in getattr(result, array):
            if not isinstance(obj, dict):
                return None
            pos: int | None = None
            person_ids: list[str] = []
            ids: list[str] = []
            errors: list[Any] = []
            echoes: list[tuple[str, str]] = []
            for name, value in obj.items():
                if name in ERROR_NAMES:
                    errors.append(value)
                elif isinstance(value, str):
                    hit = by_key.get(value)
                    if hit is not None:
                        if pos is not None and hit != pos:
                            return None
                        pos = hit
                    elif not value or (kind := TEXT_FIELDS.get(name)) is None:
                        continue
                    elif kind == "person_id":
                        person_ids.append(value)
                    elif kind == "id":
                        ids.append(value)
                    else:
                        echoes.append((kind, value))
                elif isinstance(value, (dict, list)):
                    return None
            if pos is None or outcomes[pos] is not None:
                return None
            if echoes:
                own = identities.spelled(pos)
                for kind, spelled in echoes:
                    if own.get(kind) != spelled:
                        return None
            outcomes[pos] = settled(members[pos], state, person_ids, ids, errors)
    if any(o is None for o in outcomes):
        return None
    return cast("list[Outcome]", outcomes)  # every slot filled, checked just above
