"""What a source yields, checked as it is consumed: a plugin's slip must end its read loudly, never
lose a record in silence (a state the ledger cannot store, a thing that is no record). A record whose
id capture-sync cannot keep (no string, empty, a control character or a lone surrogate, longer than
`MAX_ID_BYTES`) is no slip of the read: it becomes a rejection in the ledger saying why, and the
records after it go on (ended at it, the read would stop there on every pass).

The checks cost a few type tests per record; a state is walked for JSON types, except the
containers already walked for an earlier record of the same read (a file source shares its list of
files read between its records), so a large state costs once, not once per record. The path named
in a problem is spelled only when there is one: the walk carries the keys, not their text.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..source import BadRecord, Item, Passed, Record

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")
# The longest record id, in UTF-8 bytes: it is a key of the ledger's indexes, and PostgreSQL refuses
# an index row over 2704 bytes (the whole chunk, on every pass). Ids are keys, not content.
MAX_ID_BYTES = 1000
_SURELY_SHORT = MAX_ID_BYTES // 4  # so many characters are at most MAX_ID_BYTES in UTF-8, without encoding them
ID_RULE = f"a record id is a non-empty string of printable text, at most {MAX_ID_BYTES} bytes in UTF-8"
_SHOWN_ID = 200
_MAX_DEPTH = 64
_MEMO_SIZE = 256
_MEMO_FROM = 16
_SCALARS = frozenset({str, int, bool, type(None)})


class Slip(Exception):
    """The rule a yielded item broke, said for a plugin author."""


def id_problem(value: Any, what: str) -> str | None:
    """Why the ledger cannot keep `value` as a record id (`ID_RULE`), said of `what`; None if it can.
    Without the id itself (its rejection names it in its position), so that alike reasons add up."""
    if not isinstance(value, str):
        return f"{what} must be a non-empty string, not {_kind(value)}"
    if not value.strip():
        return f"{what} must be a non-empty string, not {value!r}"
    if not value.isprintable():  # printable text holds no control character and no surrogate
        if _CONTROL.search(value):
            return f"{what} holds a control character"
        if _SURROGATE.search(value):
            return f"{what} holds a lone surrogate, which UTF-8 cannot encode"
    if len(value) > _SURELY_SHORT and len(value.encode("utf-8")) > MAX_ID_BYTES:
        return f"{what} is longer than {MAX_ID_BYTES} bytes in UTF-8"
    return None


def shown_id(value: Any) -> str:
    """An id as a problem shows it and a rejection is kept under: printable ASCII (`ascii()`), so
    ids that differ only in a NUL, a surrogate or a type (5 and '5') stay apart; a long one cut,
    with a digest of the whole so that two long ones stay apart too."""
    try:
        text = ascii(value)
    except Exception:  # an int beyond the digit limit, a repr that raises: a plugin's value
        return f"<a {type(value).__name__}>"
    if len(text) <= _SHOWN_ID:
        return text
    digest = hashlib.blake2b(text.encode("ascii"), digest_size=8).hexdigest()
    return f"{text[:_SHOWN_ID]}... ({len(text)} characters, digest {digest})"


def shown_text(text: str) -> str:
    """A plugin's text (a `where`, a bad record's reason) as the ledger can keep it: a NUL or a lone
    surrogate as its escape (`\\x00`, `\\ud800`). PostgreSQL refuses a NUL in text, SQLite's JSON
    functions end the text there, and UTF-8 cannot encode a surrogate. Nothing else changes, so the
    key `@where` of a bad record an existing ledger holds stays the same."""
    return text if text.isprintable() or not _UNSTORABLE.search(text) else _UNSTORABLE.sub(_escaped, text)


def kept_key(text: str) -> str:
    """A position (`@where`) as a record id the ledger can keep: at most `MAX_ID_BYTES` in UTF-8 (an
    index entry on PostgreSQL holds at most 2,704 bytes, and a longer one failed the chunk on every
    pass), a longer one cut with a digest of the whole, so two long ones stay apart; a shorter one, as
    existing ledgers hold it, unchanged."""
    if len(text) <= _SURELY_SHORT:
        return text
    encoded = text.encode("utf-8")
    if len(encoded) <= MAX_ID_BYTES:
        return text
    digest = hashlib.blake2b(encoded, digest_size=8).hexdigest()
    head = encoded[: MAX_ID_BYTES - 80].decode("utf-8", "ignore")
    return f"{head}... ({len(encoded)} bytes, digest {digest})"


def _escaped(match: re.Match[str]) -> str:
    return ascii(match.group())[1:-1]


def _rejected(item: Record | BadRecord, problem: str) -> BadRecord:
    """A record whose id the ledger cannot keep, as a rejection kept under its position: its `where`
    and its id shown as text, or without a `where` its id and the state after it (two records with
    the same bad id stay apart by their state). What was read of it stays for diagnosis, and its
    state moves the cursor."""
    reason = f"{problem} ({ID_RULE}: make the source yield one)"
    shown = shown_id(item.id)
    if isinstance(item, BadRecord):
        return BadRecord(f"{item.where} (id {shown})", f"{item.reason}; {reason}", item.state, None, item.raw)
    where = f"{item.where} (id {shown})" if item.where else f"id {shown}, state after it {shown_id(item.state)}"
    return BadRecord(where, reason, item.state, None, item.data)


def _kind(value: Any) -> str:
    return "None" if value is None else f"a {type(value).__name__}"


class Checker:
    """Checks one read's items in turn; `check` returns the item to take (a record with an id the
    ledger cannot keep: a BadRecord saying why) or raises Slip naming the first rule broken. Without
    `states` (a snapshot read, which never resumes from one and stores none) states are not walked."""

    def __init__(self, *, states: bool = True) -> None:
        self._walked: dict[int, Any] = {}  # id -> container already walked (kept alive so its id is not reused)
        self._states = states

    def check(self, item: Any) -> Item:
        """`checked`, told without its calls for a record as the built-in sources make one where no
        state is walked: a plain dict, no order, an exact str id of printable text, not blank and
        surely short. `checked` passes such a record as it is (tests/delivery/test_boundary_fast_path.py)."""
        if type(item) is Record and not self._states and type(item.data) is dict and item.order is None:
            rid = item.id
            if type(rid) is str and len(rid) <= _SURELY_SHORT and rid.isprintable() and rid.strip():
                return item
        return self.checked(item)

    def checked(self, item: Any) -> Item:
        """Every rule, in its order, for any item."""
        whose: str | None  # the item's kind, when it has an id to check
        if isinstance(item, Record):
            problem, whose = None, "a Record's id"
            if type(item.data) is not dict and not isinstance(item.data, Mapping):
                problem = f"a Record's data must be a mapping of fields, not {_kind(item.data)}"
            elif item.order is not None and not _is_order(item.order):
                problem = f"a Record's order must be a finite number or a string, not {_kind(item.order)}"
        elif isinstance(item, BadRecord):
            problem, whose = None, None if item.id is None else "a BadRecord's id"  # it may not know its id
            if item.raw is not None and not isinstance(item.raw, Mapping):
                problem = f"a BadRecord's raw must be a mapping or None, not {_kind(item.raw)}"
            if problem is None and not (isinstance(item.where, str) and item.where.strip()):
                problem = f"a BadRecord's where must name its position, not {item.where!r}"
        elif isinstance(item, Passed):  # it has no state: it moves no cursor
            # looked up as its id shown (never a key the ledger holds): counted as late, and named
            return item if id_problem(item.id, "") is None else Passed(shown_id(item.id), item.where)
        else:
            raise Slip(f"read() yielded {_kind(item)}, not a Record, a BadRecord or a Passed row")
        if problem is None and self._states:
            problem = self._state_problem(item.state, ())
        if problem is not None:
            raise Slip(problem)
        if whose is not None:
            problem = id_problem(item.id, whose)
            if problem is not None:
                return _rejected(item, problem)
            if type(item.id) is not str:  # a str subclass (a `(str, Enum)` member): kept as its characters
                return replace(item, id=str.__str__(item.id))
        return item

    def _state_problem(self, value: Any, keys: tuple[Any, ...]) -> str | None:
        """Why `value` would not come back from the ledger as it is (JSON), if it would not; `keys`
        lead to it from the state. On the hot path: scalars are told by their exact type without a
        call, the common case of a small dict."""
        kind = type(value)
        if kind in _SCALARS:
            return None
        if kind is not dict and kind is not list:  # a state is nearly always a dict: it skips these tests
            if kind is float or isinstance(value, float):
                return (
                    None
                    if math.isfinite(value)
                    else f"the state holds {value!r} at {_path(keys)}, which JSON cannot hold"
                )
            if isinstance(value, str | bool | int):
                return None
            if not isinstance(value, dict | list | tuple):
                return f"the state holds {_kind(value)} at {_path(keys)}, which JSON cannot hold (the ledger stores states as JSON)"
        if id(value) in self._walked:
            return None
        if len(keys) >= _MAX_DEPTH:
            return f"the state nests deeper than {_MAX_DEPTH} levels at {_path(keys)}"
        pairs = value.items() if isinstance(value, dict) else enumerate(value)
        for key, inner in pairs:
            if type(key) is not str and isinstance(value, dict):
                return f"the state has a {type(key).__name__} key {key!r} at {_path(keys)}: JSON keys are strings"
            kind = type(inner)
            if kind in _SCALARS or (
                (kind is tuple or kind is list) and len(inner) <= _MEMO_FROM and _SCALARS.issuperset(map(type, inner))
            ):
                continue  # a scalar, or a short flat list of them (a file position's tail): told without a call
            problem = self._state_problem(inner, (*keys, key))
            if problem:
                return problem
        if len(value) > _MEMO_FROM:  # only large containers are worth remembering (a file source's list of files read)
            if len(self._walked) >= _MEMO_SIZE:
                self._walked.clear()
            self._walked[id(value)] = value
        return None


def _path(keys: tuple[Any, ...]) -> str:
    """Where in the state, as the problem names it: `state['files'][0]`."""
    return "state" + "".join(f"[{key!r}]" for key in keys)


def _is_order(value: Any) -> bool:
    if isinstance(value, str):
        return True
    return isinstance(value, float | int) and not isinstance(value, bool) and math.isfinite(value)


def position(index: int, item: Any) -> str:
    """Where a slip happened, for one line: the item's number in the read, and its id and where if it has them."""
    parts = [f"item {index} of the read"]
    for name in ("id", "where"):
        value = getattr(item, name, None)
        if isinstance(value, str) and value:
            parts.append(f"{name} {_CONTROL.sub('?', value)[:80]!r}")
    return ", ".join(parts)
