"""The two rules every text value follows (connector/mapping/values.py): control characters never
reach the API, and text that is only whitespace or invisible characters is absent."""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.api.models import PersonInput
from connector.mapping import Mapping, Rejection

ONE_LINE = ("name", "first_name", "last_name", "email", "phone", "company", "job_title")
TABLE = {
    "first_name": "First",
    "name": {"template": "{First} {Last}"},
    "last_name": {"field": "Last", "transform": "strip", "default": "Unknown"},
    "email": {"field": "Email", "transform": "lower"},
    "phone": {"field": "Phone", "transform": "e164", "region": "US"},
    "company": "Company",
    "notes": "Notes",
    "custom_fields": {"plan": "Plan", "tags": "Tags"},
}
MAPPING = Mapping.from_config(TABLE, where="sources.s.mapping")
INVISIBLE = [
    "\u200b",
    "\xa0",
    "\ufeff",
    "\u2060",
    "\u200d",
    "\u3164",
    "\u2800",
    "\ufe0f",
    "\u3000",
    "\x00",
    "\x1b",
    "\x85",
]


def strings(obj: Any) -> list[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, list):
        return [s for item in obj for s in strings(item)]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in (*strings(k), *strings(v))]
    return []


def controls(text: str, *, allowed: str = "\t\n\r") -> set[str]:
    return {ch for ch in text if unicodedata.category(ch) == "Cc" and ch not in allowed}


def test_controls_are_removed_and_line_breaks_stay_only_in_free_text() -> None:
    person = MAPPING.map(
        {
            "First": "An\x00n",
            "Last": "Lee\x1b[31m",
            "Email": "ann@\x07example.com",
            "Company": "Acme\r\nInc\x85",
            "Notes": "line one\r\n\tline two\x00",
            "Plan": "p\x7fro\nmax",
            "Tags": ["a\x00", {"k\x01": "v\x9f"}],
        }
    )
    assert person == PersonInput(
        first_name="Ann",
        name="Ann Lee[31m",
        last_name="Lee[31m",
        email="ann@example.com",
        company="Acme  Inc",
        notes="line one\r\n\tline two",
        custom_fields={"plan": "pro\nmax", "tags": ["a", {"k": "v"}]},
    )


@pytest.mark.parametrize("blank", [*INVISIBLE, "\u200b \ufeff\t", "\xa0\x00\u200b"])
def test_a_value_of_only_invisible_characters_is_absent(blank: str) -> None:
    record = {
        "First": "Ann",
        "Email": "ann@example.com",
        "Last": blank,
        "Phone": blank,
        "Company": blank,
        "Notes": blank,
        "Plan": blank,
    }
    assert MAPPING.map(record) == PersonInput(
        first_name="Ann", name="Ann", last_name="Unknown", email="ann@example.com"
    )
    assert MAPPING.map({"First": blank, "Last": blank, "Email": "ann@example.com"}) == Rejection(
        ["needs `name` or `first_name`"]
    )


def test_invisible_characters_inside_visible_text_are_kept() -> None:
    person = MAPPING.map({"First": "Ann\u200dMarie", "Email": "ann@example.com", "Company": "\ufeffAcme\xa0Inc"})
    assert isinstance(person, PersonInput)
    assert (person.first_name, person.company) == ("Ann\u200dMarie", "\ufeffAcme\xa0Inc")


tricky = st.characters(categories=["Cc", "Cf", "Zs", "Zl", "Zp"]) | st.sampled_from(INVISIBLE)
mixed_text = st.text(tricky | st.characters(codec="utf-8"), max_size=30)
json_value = st.recursive(
    mixed_text, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(mixed_text, inner, max_size=3), max_leaves=6
)
FIELDS = ["First", "Last", "Email", "Phone", "Company", "Notes", "Plan", "Tags"]


def dropping(spec: Any) -> dict[str, Any]:
    """Every field of a mapping table with on_error = "drop"."""
    if isinstance(spec, str):
        return {"field": spec, "on_error": "drop"}
    return {**spec, "on_error": "drop"}


DROPPING = Mapping.from_config(
    {
        **{k: dropping(v) for k, v in TABLE.items() if k != "custom_fields"},
        "custom_fields": {"plan": dropping("Plan"), "tags": dropping("Tags")},
    },
    where="sources.s.mapping",
)


@settings(max_examples=300, deadline=None)
@given(
    st.fixed_dictionaries(
        {"First": st.builds("Ann{}".format, mixed_text), "Email": st.just("ann@example.com")},
        optional={
            "Last": mixed_text,
            "Phone": mixed_text,
            "Company": mixed_text,
            "Notes": mixed_text,
            "Plan": json_value,
            "Tags": json_value,
        },
    )
)
def test_no_control_character_survives_in_any_field(record: dict[str, Any]) -> None:
    result = DROPPING.map(record)
    assert isinstance(result, PersonInput)
    for key, item in result.to_json_dict().items():
        for text in strings(item):
            assert not controls(text, allowed="" if key in ONE_LINE else "\t\n\r"), (key, text)
            assert key == "custom_fields" or text.strip()


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELDS), st.text(tricky, max_size=6)))
def test_whitespace_and_invisible_only_values_are_never_sent(record: dict[str, Any]) -> None:
    result = MAPPING.map({**record, "Email": "ann@example.com", "First": "Ann"})
    assert result == PersonInput(first_name="Ann", name="Ann", last_name="Unknown", email="ann@example.com")
