"""Property tests: whatever a record holds, the mapper returns a valid capture input that encodes
to JSON with no control character but tab and line breaks, or a rejection with reasons naming
fields; it never raises."""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import phonenumbers
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from connector.api.encoding import encode_json
from connector.api.models import PERSON_FIELDS, PersonInput
from connector.mapping import Mapping, Rejection

FIELDS = ["First", "Last", "Full", "Email", "Phone", "Plan", "Company", "Notes", "Seats"]
MAPPINGS = [
    Mapping.from_config(table, where="sources.p.mapping")
    for table in (
        {
            "first_name": "First",
            "name": {"template": "{First} {Last}"},
            "email": {"field": "Email", "transform": "lower"},
            "phone": {"field": "Phone", "transform": "e164", "region": "US"},
            "custom_fields": {"plan": "Plan", "seats": "Seats"},
        },
        {
            "first_name": {"field": "Full", "transform": ["strip", "first_name"], "default": "Friend"},
            "last_name": {"field": "Full", "transform": "last_name"},
            "email": {"field": "Email", "transform": ["strip", "lower"]},
            "phone": {"field": "Phone", "transform": ["strip", "e164"]},
            "company": {"field": "Company", "transform": "upper"},
            "notes": {"template": "{Notes} / {Company}"},
            "custom_fields": {"origin": {"constant": "import"}, "raw": "Notes"},
        },
        {"name": "Full", "email": "Email", "phone": "Phone", "job_title": "Last", "custom_fields": {"all": "Plan"}},
    )
]

any_text = st.text(st.characters(exclude_categories=()), max_size=60)  # lone surrogates included
emailish = st.builds(
    lambda a, b: f"{a}@{b}.com",
    st.text("abcXYZ._+-", min_size=1, max_size=12),
    st.text("abcxyz-", min_size=1, max_size=12),
)
phoneish = st.one_of(st.from_regex(r"\+?[0-9 ()-]{0,20}", fullmatch=True), st.integers(0, 10**15), st.floats())
scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.builds(pow, st.just(10), st.just(4400)),
    st.floats(),
    st.decimals(),
    st.just(""),
    st.just("   "),
    any_text,
    emailish,
    phoneish,
    st.just("x" * 200_000),
    st.just(datetime(2024, 1, 1, tzinfo=UTC)),
    st.just(Decimal("NaN")),
)
value = st.recursive(
    scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
records = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=8), value, max_size=12)


def _leaves(obj: Any) -> Iterator[Any]:
    """Every scalar of a JSON value, object keys included."""
    if isinstance(obj, list):
        for item in obj:
            yield from _leaves(item)
    elif isinstance(obj, dict):
        for key, item in obj.items():
            yield key
            yield from _leaves(item)
    else:
        yield obj


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example])
@given(st.sampled_from(MAPPINGS), records)
@example(MAPPINGS[0], {"First": "Ann", "Email": "a@example.com", "Seats": 10**4400, "Plan": 2**60})
def test_any_record_gives_a_valid_input_or_reasons(mapping: Mapping, record: dict[str, Any]) -> None:
    result = mapping.map(record)
    if isinstance(result, PersonInput):
        body = result.to_json_dict()
        encoded = encode_json(body)  # what the engine sends: must be UTF-8 JSON
        assert PersonInput.model_validate(json.loads(encoded)) == result
        assert all(v != "" for v in body.values())
        assert all(math.isfinite(v) for v in _leaves(body) if isinstance(v, float))
        texts = "".join(v for v in _leaves(body) if isinstance(v, str))
        assert not any(unicodedata.category(ch) == "Cc" and ch not in "\t\n\r" for ch in texts)
    else:
        assert isinstance(result, Rejection) and result.reasons
        for reason in result.reasons:
            assert isinstance(reason, str)
            assert any(f in reason for f in PERSON_FIELDS) or "hook" in reason


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(MAPPINGS),
    st.dictionaries(
        st.sampled_from(FIELDS), st.sampled_from(["", " ", "\t", None, "\u200b", "\ufeff", "\xa0 ", "\x00"])
    ),
)
def test_blank_values_are_absent_not_errors_of_their_own(mapping: Mapping, record: dict[str, Any]) -> None:
    result = mapping.map(record)
    assert isinstance(result, Rejection)
    assert all("needs `" in r for r in result.reasons), result.reasons  # only the API's own rules A and B


@settings(max_examples=300, deadline=None)
@given(phoneish | st.sampled_from(["555-0100", "5550100", "+1 555-0100", "1-555-0100"]))
def test_e164_gives_only_valid_numbers(phone: Any) -> None:
    result = MAPPINGS[0].map({"First": "Ann", "Email": "a@example.com", "Phone": phone})
    if isinstance(result, PersonInput) and result.phone is not None:
        assert phonenumbers.is_valid_number(phonenumbers.parse(result.phone))
        assert result.phone != "+15550100"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example])
@given(st.sampled_from(MAPPINGS), records)
@example(MAPPINGS[0], {"First": "Ann", "Email": "a@example.com", "Phone": "(415) 555-0132", "Plan": "pro"})
@example(MAPPINGS[2], {"Full": "Zoë", "Email": "zoe@example.com", "Plan": [1.5, {"a": None}]})
def test_a_sync_stores_the_fields_of_the_very_person_map_gives(mapping: Mapping, record: dict[str, Any]) -> None:
    """`payload_noting` (a sync's path, which skips the model for most records) agrees with
    `map_noting` in everything: the payload's fields in order, its bytes, the notes, the reasons."""
    _same_person_both_ways(mapping, record)


# Records most of which the mappings accept, so that the model-free path is tested on what it
# answers, not only on what it leaves to the model: texts with tabs, line breaks, control and
# invisible characters, surrounding blanks, numbers, valid and invalid emails and phones.
fieldish = st.text(st.sampled_from("Ada Zoë,\t\n\r\x00\x85\u200b\xa0"), max_size=8) | scalar
likely = st.fixed_dictionaries(
    {
        "Full": fieldish,
        "Email": emailish | st.sampled_from([" ada@Example.com ", "ada@example.com\t", "zoë@example.com", "a@b"]),
    },
    optional={
        "First": fieldish,
        "Last": fieldish,
        "Phone": st.sampled_from(["(415) 555-0132", " +1 415 555 0132 ", "555-0100", "\t4155550132"]) | phoneish,
        "Company": fieldish,
        "Notes": fieldish,
        "Plan": value,
        "Seats": value,
    },
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example])
@given(st.sampled_from(MAPPINGS), likely)
@example(MAPPINGS[2], {"Full": "Ada\tLovelace", "Email": "ada@example.com"})
@example(MAPPINGS[1], {"Full": " ", "Email": "ada@example.com", "Notes": "a\nb", "Company": "x\ty"})
def test_records_a_sync_mostly_accepts_are_stored_as_map_gives_them(mapping: Mapping, record: dict[str, Any]) -> None:
    _same_person_both_ways(mapping, record)


def _same_person_both_ways(mapping: Mapping, record: dict[str, Any]) -> None:
    person, notes = mapping.map_noting(record)
    payload, payload_notes = mapping.payload_noting(record)
    assert payload_notes == notes
    if isinstance(person, PersonInput):
        assert isinstance(payload, dict)
        assert list(payload.items()) == list(person.to_json_dict().items())
        assert encode_json(payload) == encode_json(person.to_json_dict())
    else:
        assert isinstance(payload, Rejection) and payload.reasons == person.reasons
    _same_bytes_as_encoded(mapping, record, payload, notes)


def _same_bytes_as_encoded(
    mapping: Mapping, record: dict[str, Any], payload: dict[str, Any] | Rejection, notes: tuple[str, ...]
) -> None:
    """`encoded_noting` (what a sync stores) is `payload_noting` encoded by `encode_json`, byte for
    byte, or the same error (a custom field's name UTF-8 cannot encode)."""
    try:
        expected: bytes | Rejection = payload if isinstance(payload, Rejection) else encode_json(payload)
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            mapping.encoded_noting(record)
        return
    encoded, encoded_notes = mapping.encoded_noting(record)
    assert encoded_notes == notes
    if isinstance(expected, Rejection):
        assert isinstance(encoded, Rejection) and encoded.reasons == expected.reasons
    else:
        assert encoded == expected


def _reshape(record: dict[str, Any], person: dict[str, Any]) -> dict[str, Any]:
    """A hook that hands back whatever the record holds under a person field's name (or `extra`), raw."""
    return {**person, **{key: value for key, value in record.items() if key in (*PERSON_FIELDS, "extra")}}


# Mappings whose cleaned fields are not known to be of the model-free path's shape: a hook reshapes
# them, or a custom field's name is not text the model can read (a lone surrogate). Each record of
# theirs is checked field by field (`plain_person`), not taken on trust (`plain_shaped`).
UNSHAPED = [
    Mapping(MAPPINGS[0].rules, ("tests:reshape", _reshape), "reshaped"),
    Mapping.from_config({"name": "Full", "email": "Email", "custom_fields": {"\ud800": "Plan"}}, where="m"),
]
unshaped_records = st.dictionaries(
    st.sampled_from([*FIELDS, *PERSON_FIELDS, "extra"]) | st.text(max_size=8),
    value | st.sampled_from(["Ada", "a@b.com"]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example])
@given(st.sampled_from(UNSHAPED), unshaped_records)
@example(UNSHAPED[0], {"First": "Ann", "Email": "a@example.com", "company": "\ud800"})
@example(UNSHAPED[0], {"First": "Ann", "Email": "a@example.com", "custom_fields": 5})
@example(UNSHAPED[0], {"First": "Ann", "Email": "a@example.com", "extra": "x"})
@example(UNSHAPED[1], {"Full": "Ann", "Email": "a@example.com", "Plan": "pro"})
def test_a_hook_or_an_unreadable_custom_name_still_stores_the_person_map_gives(
    mapping: Mapping, record: dict[str, Any]
) -> None:
    person, notes = mapping.map_noting(record)
    payload, payload_notes = mapping.payload_noting(record)
    assert payload_notes == notes
    if isinstance(person, PersonInput):
        assert isinstance(payload, dict) and list(payload.items()) == list(person.to_json_dict().items())
    else:
        assert isinstance(payload, Rejection) and payload.reasons == person.reasons
    _same_bytes_as_encoded(mapping, record, payload, notes)
