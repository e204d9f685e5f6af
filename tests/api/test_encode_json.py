"""The request body's bytes are a person's content as the ledger hashes it, and so its idempotency
key: whichever encoder makes them, they must be the bytes `json.dumps` made when the key was given,
or an upgrade would send every person again as new content (and a resent batch would not be
byte-identical)."""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.api import encode_json
from connector.api.encoding import encode_person, encode_texts
from connector.keys import content_hash


def before(payload: Any) -> bytes:
    """The encoder every ledger before the compiled one was written with."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class Level(enum.IntEnum):
    HIGH = 3


class Name(str):
    pass


# Text of every kind: escapes (quotes, backslashes, control characters), non-ASCII of every plane,
# line and paragraph separators; keys too.
text = st.text(st.characters(exclude_categories=["Cs"]), max_size=30) | st.sampled_from(
    ["", '"', "\\", "\x00\x1f\x7f\x85", "\b\f\n\r\t", "\u2028\u2029", "</script>", "\ufeff", "😀", "e\u0301"]
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats()  # nan and the infinities too: json.dumps writes them, so they must not change
    | st.sampled_from([1e-07, 1e16, 1e22, -0.0, 5e-324, 0.1 + 0.2, 1.7976931348623157e308, 100.0])
    | text
)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4)
)
person_like = st.fixed_dictionaries(
    {"name": text, "email": text},
    optional={"phone": text, "notes": text, "custom_fields": st.dictionaries(text, json_values, max_size=5)},
)


@settings(max_examples=1000)
@given(json_values | person_like)
def test_the_bytes_are_the_ones_json_dumps_made(payload: Any) -> None:
    assert encode_json(payload) == before(payload)


@settings(max_examples=300)
@given(st.lists(person_like, min_size=1, max_size=5))
def test_a_bulk_body_is_the_same_too(persons: list[dict[str, Any]]) -> None:
    assert encode_json({"persons": persons}) == before({"persons": persons})


PERSON = {"name": 'Zoë "Z" O\'Brien\t\\', "email": "zoe@example.com", "phone": "+442079460958"}


@pytest.mark.parametrize(
    ("custom_fields", "digest"),
    [
        # The content hashes json.dumps gave these payloads, written down while it was the encoder:
        # one the compiled encoder makes, one with a float, which json.dumps still makes.
        (
            {"rank": 12, "tags": ["ü", None, True], "big": 2**70, "note": "\u2028\x01😀"},
            "8b792d23e76beffc73a8322f64627e0eca9c431ace30cbd19fa1070d9af7c577",
        ),
        (
            {"score": 1e-07, "rank": 12, "tags": ["ü", None, True], "big": 2**70},
            "709d1bbcf79ee3b6e3c907e8b837dd84c1a8de1101d90cc590adf8bdeeaa3585",
        ),
    ],
)
def test_a_key_given_before_the_change_is_the_key_given_after_it(custom_fields: dict[str, Any], digest: str) -> None:
    assert content_hash(encode_json({**PERSON, "custom_fields": custom_fields})) == digest


@pytest.mark.parametrize(
    "payload",
    [
        {"name": "\ud800"},  # a lone surrogate: no UTF-8 for it
        {"name": float("nan"), "x": {1: "int key"}},
        ("a", "tuple"),
        {"level": Level.HIGH, "name": Name("subclass")},
    ],
)
def test_what_json_dumps_refuses_or_rewrites_it_still_does(payload: Any) -> None:
    try:
        expected: Any = before(payload)
    except Exception as exc:
        with pytest.raises(type(exc)):
            encode_json(payload)
    else:
        assert encode_json(payload) == expected


def nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("encode", [encode_json, encode_person])
@pytest.mark.parametrize("depth", [300, 900, 5000])
def test_deep_nesting_is_encoded_or_refused_as_json_dumps_does(depth: int, encode: Callable[[Any], bytes]) -> None:
    payload = {"name": "N", "custom_fields": {"deep": nested(depth)}}
    try:
        expected = before(payload)
    except RecursionError:
        with pytest.raises(RecursionError):
            encode(payload)
    else:
        assert encode(payload) == expected


def test_a_cycle_is_the_error_json_dumps_raises() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference"):
        encode_json({"custom_fields": {"loop": cycle}})


# What `encode_person` is given: a payload of the model-free path's shape (its fields but the custom
# ones exact, non-empty str), with custom fields of any JSON value, nested deep or not.
plain_payload = st.fixed_dictionaries(
    {"name": text.filter(bool), "email": text.filter(bool)},
    optional={"phone": text.filter(bool), "custom_fields": st.dictionaries(text, json_values, min_size=1, max_size=5)},
)


@settings(max_examples=1000)
@given(plain_payload)
def test_a_model_free_payload_has_the_bytes_json_dumps_made(payload: dict[str, Any]) -> None:
    assert encode_person(payload) == encode_json(payload) == before(payload)


# What `encode_texts` is given: the model-free path's payload whose custom fields are exact str too.
text_payload = st.fixed_dictionaries(
    {"name": text.filter(bool), "email": text.filter(bool)},
    optional={"phone": text.filter(bool), "custom_fields": st.dictionaries(text, text, min_size=1, max_size=5)},
)


@settings(max_examples=1000)
@given(text_payload)
def test_a_payload_of_text_alone_has_the_bytes_json_dumps_made(payload: dict[str, Any]) -> None:
    assert encode_texts(payload) == encode_person(payload) == before(payload)


# The compiled encoder's own domain (what `_floatless` lets through: no float, ints of 64 bits, no
# lone surrogate): orjson alone must make json.dumps's bytes there, so that the properties above do
# not pass merely because a refusal fell back to json.dumps.
floatless = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
)


@settings(max_examples=1000)
@given(floatless | person_like)
def test_the_compiled_encoder_alone_makes_the_bytes_on_its_domain(payload: Any) -> None:
    if not _outside(payload):  # a person-like payload's custom fields may hold a float
        assert orjson.dumps(payload) == before(payload)


def _outside(value: Any) -> bool:
    """Whether a float or an int beyond 64 bits is in it: not the compiled encoder's to write."""
    if isinstance(value, dict):
        return any(_outside(v) for v in value.values())
    if isinstance(value, list):
        return any(_outside(v) for v in value)
    return isinstance(value, float) or (isinstance(value, int) and not -(2**63) <= value < 2**63)
