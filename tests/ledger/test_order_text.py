"""A version's place in its source's order (`entries.source_order`, `records.source_order`) is stored as
the text `json.dumps` writes, as every ledger written before holds it; the hot path writes it
without `json.dumps`'s set-up per value (`_enqueue._encode`): the same text for every value."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from connector.ledger._enqueue import _decode, _encode

PLACES = st.floats() | st.integers() | st.text() | st.booleans() | st.none()


@given(PLACES)
def test_a_place_is_stored_as_json_dumps_writes_it(place: float | int | str | bool | None) -> None:
    assert _encode(place) == (None if place is None else json.dumps(place))


@given(st.floats(allow_nan=False) | st.integers() | st.text())
def test_a_stored_place_reads_back_as_the_same_value(place: float | int | str) -> None:
    assert _decode(_encode(place)) == place
