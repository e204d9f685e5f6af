"""The hot path's makers of frozen dataclasses (`_frozen.maker`: a Record per row, a Mapped per record,
through their slots) make the very instance the constructor makes: equal, frozen, usable with
`dataclasses.replace`, so nothing downstream (the boundary, the ledger, a plugin's tests) can tell."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector._frozen import maker
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
    record = new_record("7", {"Email": "a@example.com"}, {"offset": 10}, None, None)
    assert record == Record("7", {"Email": "a@example.com"}, {"offset": 10})
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.id = "8"  # type: ignore[misc]
    assert dataclasses.replace(record, id="8") == Record("8", {"Email": "a@example.com"}, {"offset": 10})


def test_a_mapped_entry_made_without_its_init_is_the_constructors() -> None:
    from connector.delivery.extract import _new_mapped
    from connector.ledger import Mapped

    assert _new_mapped("7", '{"name":"Ada"}', None, ("a note",), 1.5, "d1") == Mapped(
        "7", '{"name":"Ada"}', None, ("a note",), 1.5, "d1"
    )
    assert _new_mapped("7") == Mapped("7")  # the defaults are the class's


def test_maker_refuses_a_class_whose_constructor_does_more() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        value: int

        def __post_init__(self) -> None:
            raise ValueError

    @dataclasses.dataclass(frozen=True)
    class Unslotted:
        value: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Listed:
        items: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Clashing:  # a field named as the made function's own local would be set to the instance
        obj: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Derived(Clashing):  # its base's field lives in the base's slots
        more: int = 0

    for cls in (Checked, Unslotted, Listed, Clashing, Derived):
        with pytest.raises(TypeError):
            maker(cls)
