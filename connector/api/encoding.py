"""A request body's bytes (spec 2.1-2.2): one serialisation, so that a resend is byte-identical and
a person's content hashes the same for good (`keys.content_hash`); and what a body holds, for a
limit counted in persons. Apart from the models: nothing here needs pydantic."""

from __future__ import annotations

import json
from typing import Any

import orjson


def encode_json(payload: Any) -> bytes:
    """The one serialisation used for request bodies, so a resend is byte-identical.

    Its bytes are a person's content as the ledger hashes it (`keys.content_hash`), so they are fixed
    for good: they are `json.dumps(ensure_ascii=False)` without spaces, whichever encoder makes them.
    orjson's compiled `dumps` makes the same bytes for every value but floats (its shortest spelling
    differs: 1e-07, 1e16), so it takes payloads of exact str, bool, None, dict, list and 64-bit int
    only, and `json.dumps` the rest (tests/api/test_encode_json.py holds the property). It replaced
    pydantic-core's `to_json` (the same bytes on that domain) at some 40 % of its instructions per
    person (benchmarks/read_side.py --instructions, "map and encode")."""
    try:
        plain = _floatless(payload)
    except RecursionError:  # nested deeper than the interpreter walks, or a cycle: json.dumps says which
        plain = False
    return _encoded(payload, plain)


def encode_person(payload: dict[str, Any]) -> bytes:
    """`encode_json` of a payload `plain_person` or `plain_shaped` gave (or the mapper's model-free
    path, which makes the same shape): its fields but `custom_fields` are exact str, so only the custom
    fields need `_floatless`'s walk, which cost more than the encoding itself on a whole person. The
    same bytes as `encode_json` (tests/api/test_encode_json.py)."""
    fields = payload.get("custom_fields")
    try:
        plain = fields is None or _floatless(fields)
    except RecursionError:
        plain = False
    return _encoded(payload, plain)


def encode_texts(payload: dict[str, Any]) -> bytes:
    """`encode_person` of a payload whose custom fields' values are exact str too (the mapper's
    model-free path knows when they are): nothing is left for `_floatless` to walk (the same bytes,
    tests/api/test_encode_json.py). orjson called here, not through `_encoded`: a call per record saved."""
    try:
        return orjson.dumps(payload)
    except orjson.JSONEncodeError:  # a lone surrogate: json.dumps decides
        return _encoded(payload, False)


def _encoded(payload: Any, plain: bool) -> bytes:
    """`payload`'s bytes: orjson's when `plain` (`_floatless`), json.dumps's otherwise."""
    if plain:
        try:
            return orjson.dumps(payload)
        except orjson.JSONEncodeError:  # a lone surrogate, or deeper than orjson's 254 levels: json.dumps decides
            pass
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


_SCALARS = frozenset({str, bool, type(None)})
# Bigger ints go to json.dumps: orjson refuses an int beyond 64 bits, and the property is proven on
# signed 64-bit ones.
_INT64 = 2**63


def _floatless(value: Any) -> bool:
    """Whether `value` is plain JSON without a float: the values whose encoding is the same in both.
    Loops rather than `all()` over generators: this runs once per record, and is a fifth of the cost."""
    kind = type(value)
    if kind is dict:
        for k, v in value.items():  # noqa: SIM110 (see the docstring)
            if type(k) is not str or (type(v) not in _SCALARS and not _floatless(v)):
                return False
        return True
    if kind is list:
        for v in value:  # noqa: SIM110
            if type(v) not in _SCALARS and not _floatless(v):
                return False
        return True
    if kind is int:
        return -_INT64 <= value < _INT64
    return kind in _SCALARS


def persons_in(body: bytes) -> int:
    """The persons in a bulk body, what a rate limit counted in persons charges for it (both the
    client's and the sandbox's); 1 when it cannot be read (the server says what is wrong)."""
    try:
        persons = json.loads(body).get("persons")
    except (ValueError, AttributeError):
        return 1
    return len(persons) if isinstance(persons, list) and persons else 1
