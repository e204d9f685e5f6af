"""Matching bulk result objects to batch members (design 2).

The spec leaves the objects in `successful`, `duplicates` and `failed` undocumented (2.6), so each
is placed by the evidence it carries anywhere inside it: an echoed per-person idempotency_key, an
echoed email or phone, an index. Evidence that fits several members is no evidence; pieces that
disagree make the members they name `unknown`; indices count only when the response's numbering is
consistent with everything else. Leftover objects settle leftover members by count only when that
cannot be wrong about the state. Everything else is `unknown`, with the reason, to be asked again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from ..api.models import BulkCaptureResult, PersonCaptureResult
from ..ledger import Member, Outcome
from ._identities import Identities, digits, same_phone
from ._objects import (
    CATEGORIES,
    ERROR_NAMES,
    FAILED,
    INDEX_FIELDS,
    MAX_DEPTH,
    TEXT_FIELDS,
    Settled,
    keyed_flat,
    reason,
    settled,
)

T = TypeVar("T")

_SKIPPED = frozenset({"custom_fields"})  # the person's own free-form data: no evidence in it


@dataclass(slots=True, eq=False)
class _Found:
    """What one result object says, wherever in it, and where the judging placed it. The evidence is
    kept by kind as `_collect` meets it (each kind is read once, by its own step), in document order
    within a kind; `trace`, when given, records the kinds in the order they first appear."""

    state: Settled
    array: str
    slot: int  # position in its own array: what a per-array numbering would count
    named: set[int] = field(default_factory=set)  # members that single-member evidence points to
    keyed: bool = False  # whether any of `named` came from an echoed per-person key
    echoes: list[tuple[str, str]] = field(default_factory=list)  # ("email" | "phone", value as echoed)
    indices: set[int] = field(default_factory=set)
    # Most objects hold one of these or none: a list is made at the first value (`_more`), not per object.
    person_ids: list[str] | tuple[()] = ()
    ids: list[str] | tuple[()] = ()
    errors: list[Any] | tuple[()] = ()
    fits: list[set[int]] = field(default_factory=list)  # candidate sets of shared evidence
    member: int | None = None
    trace: dict[str, None] | None = None

    def admits(self, pos: int) -> bool:
        """Whether an index pointing at `pos` agrees with the object's other evidence."""
        if self.named:
            return pos in self.named if self.member is None else pos == self.member
        return all(pos in fit for fit in self.fits)


def _more(values: list[T] | tuple[()], value: T) -> list[T]:
    """`values` with `value` added in place: linear in an answer's width (a tuple grown by copying was
    quadratic, on the event loop, for an answer listing many ids)."""
    if isinstance(values, list):
        values.append(value)
        return values
    return [value]


def _collect(node: dict[str, Any], depth: int, by_key: dict[str, int], f: _Found) -> None:
    """Every piece of evidence in `node`, `depth` levels down, into `f`. What an error field holds is
    kept as the reason only: it may well describe another person (the one this one clashed with). A
    string is a member's key wherever it stands (it names that member at once); otherwise its field
    name says what it is."""
    for name, value in node.items():
        if name in ERROR_NAMES:
            f.errors = _more(f.errors, value)
            kind = "error"
        elif isinstance(value, str):
            pos = by_key.get(value)
            if pos is not None:
                f.named.add(pos)
                f.keyed = True
                kind = "key"
            elif not value or (kind := TEXT_FIELDS.get(name)) is None:  # type: ignore[assignment]
                continue
            elif kind == "person_id":
                f.person_ids = _more(f.person_ids, value)
            elif kind == "id":
                f.ids = _more(f.ids, value)
            else:
                f.echoes.append((kind, value))
        elif isinstance(value, int):
            if name not in INDEX_FIELDS or isinstance(value, bool):
                continue
            f.indices.add(value)
            kind = "index"
        else:
            if depth < MAX_DEPTH and name not in _SKIPPED and isinstance(value, (dict, list)):
                for item in value if isinstance(value, list) else (value,):
                    if isinstance(item, dict):
                        _collect(item, depth + 1, by_key, f)
                    elif isinstance(item, str):
                        _collect({name: item}, depth, by_key, f)  # a string in a list reads as if alone
            continue
        if f.trace is not None:
            f.trace[kind] = None


def _judge(found: _Found, identities: Identities) -> None:
    """Place an object by its key, email and phone echoes; shared echoes only cross-check."""
    echoes = found.echoes
    # The keyed member's own email and phone: an echo of them is consistent, whoever else it would fit.
    keyed = next(iter(found.named)) if echoes and len(found.named) == 1 else None  # named by keys only, so far
    own = identities.spelled(keyed) if keyed is not None else None
    for kind, spelled in echoes:
        if own is not None and own.get(kind) == spelled:
            continue  # spelled as the keyed member's own: normalised alike, so its own
        value = spelled.strip().lower() if kind == "email" else digits(spelled)
        if not value:
            continue
        if keyed is not None:
            mine = identities.normalised(keyed)
            if value == mine[0] if kind == "email" else same_phone(mine[1], value):
                continue
        hits = identities.matching(kind, value)
        if len(hits) == 1:
            found.named |= hits
        elif hits:
            found.fits.append(hits)
    if len(found.named) == 1:
        (pos,) = found.named
        if not found.fits or all(pos in fit for fit in found.fits):
            found.member = pos


def _indexed(found: list[_Found]) -> list[tuple[_Found, int]]:
    """(object, its index) when the response numbers its objects one index each, without repeats,
    and not as positions in their own arrays (a per-array numbering reads the same); else none."""
    pairs = [(f, next(iter(f.indices))) for f in found if f.indices]
    values = [v for _, v in pairs]
    if not pairs or any(len(f.indices) > 1 for f, _ in pairs) or len(set(values)) != len(values):
        return []
    if len({v - f.slot for f, v in pairs}) == 1 and values[0] - pairs[0][0].slot in (0, 1):
        return []
    return pairs


def _index_base(pairs: list[tuple[_Found, int]], placed: set[int], size: int) -> int | None:
    """0 or 1 when the indices are a consistent numbering of the request: in range, agreeing with every
    object's other evidence, never putting an index-only object on a member placed otherwise, and
    either covering the whole batch or confirmed by at least one object."""
    bases = [
        base
        for base in (0, 1)
        if all(base <= v < size + base and f.admits(v - base) for f, v in pairs)
        and (len(pairs) == size or any(f.member == v - base for f, v in pairs))
        # an index alone that lands on a member its own key or echo already placed disproves the numbering
        and not any(f.member is None and not f.named and v - base in placed for f, v in pairs)
    ]
    return bases[0] if len(bases) == 1 else None


def _contradicted(pairs: list[tuple[_Found, int]], size: int) -> dict[int, str]:
    """Members placed only by an echoed email or phone that the object's own index contradicts whichever
    way the server counts: which of the two is right cannot be known, so neither is trusted. An echoed
    per-person key is exact: an index that disagrees with it is simply not trusted."""
    reasons: dict[int, str] = {}
    for f, v in pairs:
        named = f.named or ({f.member} if f.member is not None else set())
        in_range = [base for base in (0, 1) if base <= v < size + base]
        if not named or not in_range or f.keyed:
            continue
        if not any(f.admits(v - base) for base in in_range):
            for pos in named:
                reasons[pos] = f"an object in {f.array} has index {v}, which contradicts its echoed email or phone"
    return reasons


def _settle(member: Member, found: _Found) -> Outcome:
    return settled(member, found.state, found.person_ids, found.ids, found.errors)


def _scan(
    members: Sequence[Member],
    result: BulkCaptureResult,
    *,
    trace: bool = False,
    by_key: dict[str, int] | None = None,
    identities: Identities | None = None,
) -> list[_Found]:
    """Each object's evidence, judged; `by_key` and `identities` when the caller has them already."""
    by_key = {m.key: pos for pos, m in enumerate(members)} if by_key is None else by_key
    identities = Identities(members) if identities is None else identities
    found = []
    for state, array in CATEGORIES:
        for slot, obj in enumerate(getattr(result, array)):
            f = _Found(state, array, slot, trace={} if trace else None)
            if isinstance(obj, dict):
                _collect(obj, 0, by_key, f)
            _judge(f, identities)
            found.append(f)
    return found


def _contested(found: list[_Found], size: int) -> dict[int, str]:
    """Members that two objects claim, or that one object names together with another member."""
    reasons: dict[int, str] = {}
    claims: dict[int, list[_Found]] = {}
    for f in found:
        if f.member is not None:
            claims.setdefault(f.member, []).append(f)
        elif f.named:
            names = ", ".join(f"#{p + 1}" for p in sorted(f.named))
            for pos in f.named:
                reasons[pos] = f"one object in {f.array} carries contradictory evidence (persons {names} of {size})"
    for pos, fs in claims.items():
        if len(fs) > 1:
            reasons[pos] = f"{len(fs)} result objects name this person ({', '.join(f.array for f in fs)})"
    return reasons


def _by_count(leftovers: list[_Found], open_: list[int], contested: dict[int, str]) -> _Found | str:
    """A stand-in object (the shared state, no person_id) for every open member, or why not.

    Each listed person is one object, so when all leftovers sit in one array and match the open
    members in number, each open member's state is that array's, whichever object is whose.
    """
    if not leftovers:
        return "the server listed no result object for this person"
    arrays = sorted({f.array for f in leftovers}, key=[a for _, a in CATEGORIES].index)
    open_set = set(open_)
    if contested:
        why = "other members of the batch are contested"
    elif len(leftovers) != len(open_):
        why = f"{len(leftovers)} unplaced result object(s) for {len(open_)} unplaced person(s)"
    elif len(arrays) > 1:
        why = f"the unplaced objects are spread over {' and '.join(arrays)}"
    elif any(not fit & open_set for f in leftovers for fit in f.fits):
        why = "an unplaced object echoes only persons placed elsewhere"
    else:
        errors = sorted({reason(f.errors) for f in leftovers})
        shared = errors[0] if len(errors) == 1 else f"{FAILED}; its reason is one of: {'; '.join(errors)}"
        return _Found(leftovers[0].state, arrays[0], -1, errors=[shared])
    return f"no result object carries evidence for this person and the leftovers cannot settle by count: {why}"


@dataclass(frozen=True, slots=True)
class ObjectReading:
    """One result object as the matcher read it, for `check --flow`'s report: the kinds of evidence
    it carries (key, email, phone, index, person_id, id, error), those of them only nested objects
    hold, its indices, and the member (position) it was placed on by its own evidence, if any."""

    array: str
    slot: int
    evidence: tuple[str, ...]
    nested: tuple[str, ...]
    indices: tuple[int, ...]
    member: int | None


def match_bulk(members: Sequence[Member], result: BulkCaptureResult) -> list[Outcome]:
    """One outcome per member, in member order: a settled state only where the server gave it."""
    by_key = {m.key: pos for pos, m in enumerate(members)}
    identities = Identities(members)
    keyed = keyed_flat(members, result, by_key, identities)
    if keyed is not None:
        return keyed
    found = _scan(members, result, by_key=by_key, identities=identities)
    lined_up = _one_each(found, len(members))
    if lined_up is not None:
        return [_settle(m, f) for m, f in zip(members, lined_up, strict=True)]
    return _match(members, found)[0]


def _one_each(found: list[_Found], size: int) -> list[_Found] | None:
    """The objects in member order, when each one's own evidence placed it on a member, one object per
    member, and none carries an index beside echoes alone (what `_contradicted` would weigh): then no
    index moves or contradicts a placement, no member is contested and none is left to settle by
    count, so `_match` would settle each member by its object. The common answer, read without the
    batch-wide checks; None for any other."""
    if len(found) != size:
        return None
    ordered: list[_Found | None] = [None] * size
    for f in found:
        pos = f.member
        if pos is None or ordered[pos] is not None:
            return None
        if f.indices and not f.keyed:  # placed: its keys, if any, all name `pos`
            return None
        ordered[pos] = f
    return cast("list[_Found]", ordered)


def read_bulk(
    members: Sequence[Member], result: BulkCaptureResult
) -> tuple[list[Outcome], list[ObjectReading], int | None]:
    """`match_bulk`'s outcomes, what it read in each object, and the index base it trusted (0, 1 or None)."""
    outcomes, found, base = _match(members, _scan(members, result, trace=True))
    by_key = {m.key: pos for pos, m in enumerate(members)}
    readings = []
    objects = [obj for _, array in CATEGORIES for obj in getattr(result, array)]
    for f, obj in zip(found, objects, strict=True):
        top = _Found(f.state, f.array, f.slot, trace={})
        if isinstance(obj, dict):
            _collect({k: v for k, v in obj.items() if not isinstance(v, (dict, list))}, 0, by_key, top)
        kinds = tuple(f.trace or ())
        shallow = top.trace or {}
        readings.append(
            ObjectReading(
                f.array,
                f.slot,
                kinds,
                tuple(k for k in kinds if k not in shallow),
                tuple(sorted(f.indices)),
                f.member,
            )
        )
    return outcomes, readings, base


def _match(members: Sequence[Member], found: list[_Found]) -> tuple[list[Outcome], list[_Found], int | None]:
    pairs = _indexed(found)
    base = _index_base(pairs, {f.member for f in found if f.member is not None}, len(members))
    if base is not None:
        for f in found:
            if f.member is None and not f.named and f.indices:
                f.member = next(iter(f.indices)) - base
    reasons = {**_contradicted(pairs, len(members)), **_contested(found, len(members))}
    placed = {pos: f for f in found if (pos := f.member) is not None and pos not in reasons}
    open_ = [pos for pos in range(len(members)) if pos not in placed and pos not in reasons]
    rest = _by_count([f for f in found if f.member is None and not f.named], open_, reasons) if open_ else ""
    outcomes = []
    for pos, m in enumerate(members):
        if pos in placed:
            outcomes.append(_settle(m, placed[pos]))
        elif pos in reasons:
            outcomes.append(Outcome(m.entry_id, "unknown", error=reasons[pos]))
        elif isinstance(rest, _Found):
            outcomes.append(_settle(m, rest))
        else:
            outcomes.append(Outcome(m.entry_id, "unknown", error=rest))
    return outcomes, found, base


def person_outcome(member: Member, result: PersonCaptureResult) -> Outcome:
    """POST /person creates or updates the canonical person: captured either way."""
    return Outcome(member.entry_id, "captured", person_id=str(result.person_id), named_person=True)
