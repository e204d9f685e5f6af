"""What a source yields, checked as it is consumed: a plugin's slip must end its read loudly, never
lose a record in silence (an empty id superseded by the next one, a `None` id crashing the chunk's
commit, a state the ledger cannot store).

The checks cost a few type tests per record; a state is walked for JSON types, except the
containers already walked for an earlier record of the same read (a file source shares its list of
files read between its records), so a large state costs once, not once per record. The path named
in a problem is spelled only when there is one: the walk carries the keys, not their text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from ..source import BadRecord, Passed, Record

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_MAX_DEPTH = 64
_MEMO_SIZE = 256
_MEMO_FROM = 16
_SCALARS = frozenset({str, int, bool, type(None)})


class Slip(Exception):
    """The rule a yielded item broke, said for a plugin author."""


def _id_problem(value: Any, what: str) -> str | None:
    if not isinstance(value, str):
        return f"{what} must be a non-empty string, not {_kind(value)}"
    if not value.strip():
        return f"{what} must be a non-empty string, not {value!r}"
    if not value.isprintable() and _CONTROL.search(value):  # printable text holds no control character
        return f"{what} {value!r} holds a control character"
    return None


def _kind(value: Any) -> str:
    return "None" if value is None else f"a {type(value).__name__}"


class Checker:
    """Checks one read's items in turn; `check` raises Slip naming the first rule broken. Without
    `states` (a snapshot read, which never resumes from one and stores none) states are not walked."""

    def __init__(self, *, states: bool = True) -> None:
        self._walked: dict[int, Any] = {}  # id -> container already walked (kept alive so its id is not reused)
        self._states = states

    def check(self, item: Any) -> None:
        if isinstance(item, Record):
            problem = _id_problem(item.id, "a Record's id")
            if problem is None and type(item.data) is not dict and not isinstance(item.data, Mapping):
                problem = f"a Record's data must be a mapping of fields, not {_kind(item.data)}"
            if problem is None and item.order is not None and not _is_order(item.order):
                problem = f"a Record's order must be a finite number or a string, not {_kind(item.order)}"
        elif isinstance(item, BadRecord):
            problem = None if item.id is None else _id_problem(item.id, "a BadRecord's id")
            if problem is None and item.raw is not None and not isinstance(item.raw, Mapping):
                problem = f"a BadRecord's raw must be a mapping or None, not {_kind(item.raw)}"
            if problem is None and not (isinstance(item.where, str) and item.where.strip()):
                problem = f"a BadRecord's where must name its position, not {item.where!r}"
        elif isinstance(item, Passed):
            problem = _id_problem(item.id, "a Passed row's id")
            if problem is not None:
                raise Slip(problem)
            return  # it has no state: it moves no cursor
        else:
            raise Slip(f"read() yielded {_kind(item)}, not a Record, a BadRecord or a Passed row")
        if problem is None and self._states:
            problem = self._state_problem(item.state, ())
        if problem is not None:
            raise Slip(problem)

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
