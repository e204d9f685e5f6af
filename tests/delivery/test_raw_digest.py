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


class Label(str):
    """A str subclass with its own repr (a StrEnum's is `<Colour.RED: 'red'>`): never taken as plain text."""

    def __repr__(self) -> str:
        return f"Label({str(self)!r})"


# Mostly plain text, the case `raw_digests` spells without `repr`, with now and then the characters that
# make `repr` differ (quotes, backslashes, controls, non-ASCII, lone surrogates) and a str subclass.
plain = st.text(st.sampled_from("ab Z09,.@-+()\"'\\\t\x7féd\udcff"), max_size=6) | st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=6
)
shared_names = st.sampled_from(["id", "Name", "E'mail", "Ph\\one", "Zoë"]) | st.builds(Label, st.just("Name"))
rows = st.dictionaries(shared_names, plain | st.builds(Label, plain) | st.none(), max_size=4)


@settings(max_examples=600)
@given(
    st.text(max_size=4),
    st.lists(
        st.builds(Record, st.just("1"), rows, st.none(), st.none(), st.none() | st.text() | st.floats()), max_size=8
    ),
)
def test_the_digests_of_text_rows_spelled_without_repr_are_the_first_spellings(version: str, items: list[Any]) -> None:
    assert raw_digests(version, items) == [first_raw_digest(version, item) for item in items]
