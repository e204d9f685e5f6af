"""`plain_person`, the mapper's way past building a PersonInput, may only answer what the model
itself gives: the same fields in the same order (the payload's bytes, and so every key, depend on
them), and only for inputs the model accepts. For anything else it must defer to the model."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from connector.api.encoding import encode_json
from connector.api.models import PERSON_FIELDS, PersonInput, plain_person

texts = st.one_of(
    st.text(max_size=8),  # empty, blank, control characters, non-ASCII
    st.text(st.characters(categories=["Cs", "Ll"]), min_size=1, max_size=4),  # lone surrogates
    st.sampled_from(
        ["Ada", "José", "ada@example.com", "Ada@Mail.Example.ORG", "a@b.test", "x--y@a--b.com", "+14155550132"]
    ),
    st.emails(),
)
values = st.one_of(texts, st.none(), st.integers(), st.booleans(), st.lists(st.integers(), max_size=2))
custom = st.one_of(
    st.dictionaries(
        st.one_of(st.text(max_size=4), st.integers()), st.one_of(texts, st.floats(), st.none()), max_size=3
    ),
    values,
)
inputs = st.dictionaries(
    st.one_of(st.sampled_from([*PERSON_FIELDS, "idempotency_key", "extra"]), st.integers()),
    st.one_of(values, custom),
    max_size=9,
)
# Inputs of the mapper's common shape, so that the property is not only tested on deferrals.
common = st.fixed_dictionaries(
    {"name": st.text("Adlové ", min_size=1, max_size=9), "email": st.emails() | st.just("ada@example.com")},
    optional={
        "first_name": st.text("Ada", min_size=1),
        "phone": st.just("+14155550132"),
        "company": st.text(min_size=1, max_size=5),
        "custom_fields": st.dictionaries(
            st.text(max_size=4), st.one_of(st.text(max_size=4), st.integers(), st.floats())
        ),
    },
)


def _check(data: dict[str, Any]) -> bool:
    plain = plain_person(dict(data))
    if plain is None:
        return False
    person = PersonInput.model_validate(data)  # must be accepted: the shortcut answered
    assert list(plain.items()) == list(person.to_json_dict().items())
    assert encode_json(plain) == encode_json(person.to_json_dict())
    return True


@settings(max_examples=500, deadline=None)
@given(inputs)
def test_any_input_plain_person_answers_is_the_models_own_person(data: dict[str, Any]) -> None:
    try:
        _check(data)
    except ValidationError as exc:  # the shortcut answered for an input the model refuses
        raise AssertionError(f"plain_person passed {data!r}, which the model refuses: {exc}") from None


@settings(max_examples=300, deadline=None)
@given(common)
def test_records_of_the_common_shape_take_the_shortcut_with_the_same_fields(data: dict[str, Any]) -> None:
    taken = _check(data)
    if data["email"] == "ada@example.com" and "custom_fields" not in data:
        assert taken  # the shape nearly every mapped record has


def test_what_the_shortcut_defers_to_the_model() -> None:
    base = {"name": "Ada", "email": "ada@example.com"}
    assert plain_person(base) == base
    for deferred in (
        {"name": "Ada"},  # rule B: the model says why
        {**base, "email": "ada@example.local"},  # a special-use name: the validator decides
        {**base, "name": ""},
        {**base, "phone": None},
        {**base, "extra": "x"},
        {**base, "name": "Ad\udc80"},
        {**base, "custom_fields": {1: "x"}},
    ):
        assert plain_person(deferred) is None, deferred
