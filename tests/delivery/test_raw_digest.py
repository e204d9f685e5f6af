"""A record's raw digest is what change detection compares with the one the ledger holds for its
newest version: a digest that changed for the same content would make every record of every ledger
look new after an upgrade (mapped and compared again, a lookback or a snapshot pass no longer
skipping anything). `raw_digests` must give, for every record, the very digest the first spelling
(`first_raw_digest`, kept here as the definition) gave."""

from __future__ import annotations

import hashlib
from types import MappingProxyType
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


class Tagged(str):
    """A str subclass with its own repr, as numpy.str_ has (`np.str_('a')`): equal to a text key."""

    def __repr__(self) -> str:
        return f"Tagged({str.__repr__(self)})"


class Plain(str):
    """A str subclass with str's repr."""


names = st.lists(st.text(max_size=4) | st.sampled_from(["%", "%r", "'", '"', "a%%b", "\\"]), max_size=5, unique=True)


@st.composite
def chunks(draw: st.DrawFn) -> list[Any]:
    """A chunk as sources give them: records that mostly share their field names in one order (a
    file's header), some with fewer or more fields, some in another order, another header mid-chunk,
    a key that is no text, keys of a str subclass equal to the header's (review R13), a mapping other
    than a dict."""
    headers = draw(st.lists(names, min_size=1, max_size=3))
    items: list[Any] = []
    for _ in range(draw(st.integers(0, 40))):
        header = list(draw(st.sampled_from(headers)))
        kinds = ["short", "long", "shuffled", "other key", "subclass keys", "mapping", "bad"]
        kind = draw(st.sampled_from(["same"] * 6 + kinds))
        if kind == "bad":
            items.append(BadRecord("f line 1", "unreadable", None))
            continue
        if kind == "short":
            header = header[:-1]
        elif kind == "shuffled":
            header = header[::-1]
        elif kind == "subclass keys":
            header = [draw(st.sampled_from([Tagged, Plain]))(name) for name in header]
        data: Any = {name: draw(values) for name in header}
        if kind == "long":
            data["_extra"] = draw(st.lists(st.text(), max_size=2))
        elif kind == "other key":
            data[draw(st.sampled_from([1, True, 1.0, None]))] = "x"
        elif kind == "mapping":
            data = MappingProxyType(data)
        items.append(Record("1", data, None, None, draw(st.none() | st.floats() | st.text())))
    return items


@settings(max_examples=300)
@given(st.text() | st.sampled_from(["v%s", "%", "%%r"]), chunks())
def test_records_that_share_their_fields_have_the_first_spellings_digests(version: str, items: list[Any]) -> None:
    expected = [first_raw_digest(version, item) if isinstance(item, Record) else None for item in items]
    assert raw_digests(version, items) == expected


def test_a_chunk_whose_records_vary_their_fields_has_the_first_spellings_digests() -> None:
    """Past the point where the chunk stops spelling by a template, and a header that then comes back."""
    items = [Record(str(i), {f"f{i}": i, "Email": "a@b.c"}, None, None, float(i)) for i in range(100)]
    items += [Record(str(i), {"id": str(i), "Name": "Zoë"}, None, None, None) for i in range(30)]
    assert raw_digests("v1", items) == [first_raw_digest("v1", item) for item in items]
