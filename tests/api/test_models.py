"""The request models reject what the API would reject (spec 2, 8), in words a person can act on."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from connector.api import BulkBody, BulkPersonInput, ErrorEnvelope, PersonInput, SuccessEnvelope, encode_json, explain

OK = {"name": "Ada", "email": "ada@example.test"}


def problems(model: type, data: Any) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    return explain(caught.value)


@pytest.mark.parametrize(
    "data",
    [
        {"name": "Ada", "email": "ada@example.test"},
        {"first_name": "Ada", "phone": "+44 20 7946 0000"},
        {
            "name": "A",
            "first_name": "B",
            "last_name": "",
            "email": "a@b.example",
            "phone": "1",
            "company": "",
            "job_title": "",
            "notes": "",
            "custom_fields": {"any": {"nested": [1, None]}},
        },
    ],
)
def test_valid_persons(data: dict[str, Any]) -> None:
    assert PersonInput.model_validate(data).to_json_dict() == data


def test_rule_a() -> None:
    assert problems(PersonInput, {"email": "ada@example.test", "last_name": "L"}) == ["needs `name` or `first_name`"]


def test_rule_b() -> None:
    assert problems(PersonInput, {"name": "Ada", "company": "X"}) == ["needs `email` or `phone`"]


def test_rules_a_and_b_together() -> None:
    assert problems(PersonInput, {"company": "X"}) == ["needs `name` or `first_name`; needs `email` or `phone`"]


def test_unknown_property() -> None:
    assert problems(PersonInput, {**OK, "emial": "x"}) == ["unknown field `emial`"]


@pytest.mark.parametrize("email", ["not-an-email", "a@", "@b.example", "a b@c.example"])
def test_bad_email(email: str) -> None:
    (message,) = problems(PersonInput, {"name": "Ada", "email": email})
    assert message.startswith("`email` is not a valid email address")


@pytest.mark.parametrize("field", ["name", "first_name"])
def test_empty_name(field: str) -> None:
    assert problems(PersonInput, {field: "", "phone": "1"}) == [f"`{field}` must not be empty"]


@pytest.mark.parametrize("field", ["email", "company", "custom_fields"])
def test_explicit_null_is_not_absent(field: str) -> None:
    assert problems(PersonInput, {**OK, "phone": "1", field: None}) == [
        f"`{field}` must not be null (leave the field out instead)"
    ]


def test_wrong_type() -> None:
    assert problems(PersonInput, {**OK, "phone": 123}) == ["`phone` must be a string"]
    assert problems(PersonInput, {**OK, "custom_fields": []}) == ["`custom_fields` must be an object"]


def test_bulk_person_key_bounds() -> None:
    assert BulkPersonInput.model_validate({**OK, "idempotency_key": "k" * 512}).idempotency_key == "k" * 512
    assert problems(BulkPersonInput, {**OK, "idempotency_key": "k" * 513}) == [
        "`idempotency_key` is longer than 512 characters"
    ]


def test_plain_person_has_no_idempotency_key() -> None:
    assert problems(PersonInput, {**OK, "idempotency_key": "k"}) == ["unknown field `idempotency_key`"]


@pytest.mark.parametrize("count", [1, 100])
def test_bulk_body_sizes_accepted(count: int) -> None:
    assert len(BulkBody.model_validate({"persons": [OK] * count}).persons) == count


def test_bulk_body_empty() -> None:
    assert problems(BulkBody, {"persons": []}) == ["`persons` needs at least 1 item(s)"]


def test_bulk_body_over_100() -> None:
    assert problems(BulkBody, {"persons": [OK] * 101}) == ["`persons` allows at most 100 items"]


def test_bulk_body_extra_property() -> None:
    assert problems(BulkBody, {"persons": [OK], "dry_run": True}) == ["unknown field `dry_run`"]


def test_bulk_body_missing_persons() -> None:
    assert problems(BulkBody, {}) == ["missing required field `persons`"]


def test_bulk_body_points_at_the_bad_person() -> None:
    body = {"persons": [OK, {"name": "B"}, {**OK, "emial": "x"}]}
    assert problems(BulkBody, body) == ["persons.1: needs `email` or `phone`", "unknown field `persons.2.emial`"]


def test_explain_never_dumps_pydantic_text() -> None:
    messages = problems(BulkBody, {"persons": [{"email": "bad", "name": ""}], "x": 1})
    assert messages and not any("validation error" in m or "type=" in m or "input_value" in m for m in messages)


def test_error_envelope_keeps_extra_properties() -> None:
    env = ErrorEnvelope.model_validate(
        {
            "success": False,
            "statusCode": 400,
            "timestamp": "2026-11-22T08:00:00Z",
            "error": {"name": "V", "message": "m", "statusCode": 400, "fields": ["email"]},
        }
    )
    assert env.error.model_extra == {"fields": ["email"]}


def test_envelopes_check_success_flag() -> None:
    base = {"statusCode": 200, "timestamp": "2026-11-22T08:00:00Z"}
    with pytest.raises(ValidationError):
        SuccessEnvelope[dict].model_validate({**base, "success": False, "data": {}})
    with pytest.raises(ValidationError):
        ErrorEnvelope.model_validate({**base, "success": True, "error": {"name": "n", "message": "m", "statusCode": 1}})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
optional_text = st.none() | st.text(max_size=8)


@given(
    name=st.text(min_size=1, max_size=8),
    last_name=optional_text,
    phone=st.text(max_size=8),
    company=optional_text,
    notes=optional_text,
    custom_fields=st.none() | st.dictionaries(st.text(max_size=5), json_values, max_size=4),
    key=st.none() | st.text(min_size=1, max_size=8),
)
def test_to_json_dict_is_model_dump_without_nones_in_field_order(
    name, last_name, phone, company, notes, custom_fields, key
) -> None:
    # Payload bytes decide content hashes and so idempotency keys: the fast path must not change them.
    data = {
        "name": name,
        "last_name": last_name,
        "phone": phone,
        "company": company,
        "notes": notes,
        "custom_fields": custom_fields,
        "idempotency_key": key,
    }
    person = BulkPersonInput.model_validate({k: v for k, v in data.items() if v is not None})
    dumped = person.model_dump(exclude_none=True)
    assert person.to_json_dict() == dumped and list(person.to_json_dict()) == list(dumped)
    assert encode_json(person.to_json_dict()) == encode_json(dumped)
