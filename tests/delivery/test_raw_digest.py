"""A record's raw digest is what change detection compares with the one the ledger holds for its
newest version: a digest that changed for the same content would make every record of every ledger
look new after an upgrade (mapped and compared again, a lookback or a snapshot pass no longer
skipping anything). `raw_digests` must give, for every record, the very digest the first spelling
(`first_raw_digest`, kept here as the definition) gave."""

from __future__ import annotations

import hashlib
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from connector.delivery.extract import raw_digests
from connector.source import BadRecord, Record


def first_raw_digest(mapping_version: str, record: Record) -> str | None:
    """The digest as it was first defined (capture-sync before 2026-11-27), byte for byte."""
    try:
        text = f"{mapping_version}\x1f{record.order!r}\x1f{record.data!r}"
    except ValueError:
        return None
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.decimals(allow_nan=False)
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3)
)
records = st.builds(
    Record,
    id=st.text(min_size=1),
    data=st.dictionaries(st.text(), values, max_size=6),
    state=st.none(),
    where=st.none() | st.text(),
    order=st.none() | st.floats() | st.text(),
)
bad_records = st.builds(BadRecord, where=st.just("f line 1"), reason=st.just("unreadable"), state=st.none())


@settings(max_examples=400)
@given(st.text(), st.lists(records | bad_records, max_size=6))
@example("abc123", [Record("1", {"Email": "a\udcff@example.com"}, None)])  # a lone surrogate (surrogatepass)
@example("abc123", [Record("1", {"n": 10**5000}, None)])  # no repr: None
@example("abc123", [Record("1", {"Name": "Zoë", "Tags": ["a", 1.5, None]}, None, "f line 2", 3.0)])
def test_the_digests_are_the_first_spellings(version: str, items: list[Any]) -> None:
    expected = [first_raw_digest(version, item) if isinstance(item, Record) else None for item in items]
    assert raw_digests(version, items) == expected
