"""`new_record` (how the built-in sources make a Record per row, through its slots) makes the very
Record the constructor makes: equal, frozen, and usable with `dataclasses.replace`,
so nothing downstream (the boundary, the mapper, a plugin's tests) can tell them apart."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.source import Record, new_record

texts = st.text(max_size=10)
scalars = st.none() | st.integers() | texts


@given(
    texts,
    st.dictionaries(texts, scalars, max_size=4),
    st.dictionaries(texts, scalars, max_size=3),
    st.none() | texts,
    st.none() | texts | st.floats(allow_nan=False),
)
def test_new_record_is_the_record_the_constructor_makes(
    id: str, data: dict[str, Any], state: Any, where: str | None, order: Any
) -> None:
    made, built = new_record(id, data, state, where, order), Record(id, data, state, where, order)
    assert type(made) is Record
    assert made == built and repr(made) == repr(built)
    assert dataclasses.astuple(made) == dataclasses.astuple(built)


def test_a_new_record_is_frozen_and_its_defaults_are_the_constructors() -> None:
    record = new_record("7", {"Email": "a@example.com"}, {"offset": 10})
    assert record == Record("7", {"Email": "a@example.com"}, {"offset": 10})
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.id = "8"  # type: ignore[misc]
    assert dataclasses.replace(record, id="8") == Record("8", {"Email": "a@example.com"}, {"offset": 10})
