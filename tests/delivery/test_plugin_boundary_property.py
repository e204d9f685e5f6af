"""Issue 22's property: whatever a plugin yields, no exception reaches the user, and no record yielded
before the first slip is lost (each is in the ledger, the cursor after the last of them). A record id
the ledger cannot keep is no slip (issue 24): that record is in the ledger as rejected, saying why."""

from __future__ import annotations

import datetime
import tempfile
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from connector.delivery import SourceJob
from connector.delivery._boundary import ID_RULE
from connector.delivery.extract import NoProgress, extract
from connector.delivery.report import RunReport
from connector.ledger import Ledger
from connector.mapping import Mapping
from connector.source import BadRecord, Record, Source, SourceOptions

GOOD_IDS = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x2FF, exclude_characters="\x7f"), min_size=1, max_size=6
).filter(str.strip)
JUNK = st.one_of(
    st.none(),
    st.integers(),
    st.floats(),
    st.binary(max_size=3),
    st.just(datetime.date(2026, 1, 1)),
    st.sets(st.integers(), max_size=2),
    st.lists(st.integers(), max_size=2),
    st.text(max_size=3),
)
STATES = st.recursive(
    st.one_of(st.none(), st.integers(), st.text(max_size=3), st.floats(), st.just(datetime.datetime(2026, 1, 1))),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.one_of(st.text(max_size=2), st.integers()), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def items(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["record", "record", "record", "bad", "junk_id", "junk_data", "junk_state", "junk"]))
    rid = draw(GOOD_IDS)
    data = {"Name": draw(st.text(max_size=5)), "Email": f"{draw(st.integers(0, 50))}@example.com"}
    if kind == "record":
        return Record(rid, data, draw(st.integers(0, 9)))
    if kind == "bad":
        return BadRecord(f"row {rid}", "unreadable", draw(st.integers(0, 9)), draw(st.one_of(st.none(), GOOD_IDS)))
    if kind == "junk_id":
        junk_id = st.one_of(JUNK, st.sampled_from(["", "a\x00b", " ", "a\ud800", "x" * 1001]))
        return Record(draw(junk_id), data, 0, draw(st.one_of(st.none(), st.just(f"line {rid}"))))
    if kind == "junk_data":
        return Record(rid, draw(JUNK), 0)
    if kind == "junk_state":
        return Record(rid, data, draw(STATES))
    return draw(st.one_of(JUNK, st.just(data)))


class Yields(Source):
    """Yields exactly what it is given, then maybe raises."""

    class Options(SourceOptions):
        pass

    def __init__(self, given: list[Any], raise_at_end: bool) -> None:
        super().__init__("plugin", self.Options())
        self.given, self.raise_at_end = given, raise_at_end

    def read(self, state: Any) -> Iterator[Any]:
        yield from self.given
        if self.raise_at_end:
            raise TypeError("the plugin's own bug")


def _good_id(value: Any) -> bool:
    return (
        isinstance(value, str)
        and value.strip() != ""
        and not any(unicodedata.category(c) in ("Cc", "Cs") for c in value)
        and len(value.encode("utf-8", "surrogatepass")) <= 1000
    )


def _slips(item: Any) -> bool:
    """An independent statement of the contract (not the checker's code)."""
    if isinstance(item, Record):
        good = isinstance(item.data, dict)
    elif isinstance(item, BadRecord):
        good = True
    else:
        return True
    return not (good and _json_safe(item.state))  # an id the ledger cannot keep is a rejection, not a slip


def _json_safe(value: Any) -> bool:
    if value is None or isinstance(value, str | bool | int):
        return True
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, list):
        return all(_json_safe(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_safe(v) for k, v in value.items())
    return False


@settings(max_examples=150, deadline=None)
@given(st.lists(items(), max_size=25), st.integers(1, 6), st.booleans())
# found by hypothesis: a last chunk of records read again unchanged left the cursor before them
@example([Record("0", {"Name": "", "Email": "0@example.com"}, state=s) for s in (0, 0, 1)], 2, False)
def test_whatever_a_plugin_yields_nothing_escapes_and_nothing_before_the_first_slip_is_lost(
    given_items: list[Any], chunk_size: int, raise_at_end: bool
) -> None:
    first_slip = next((i for i, item in enumerate(given_items) if _slips(item)), None)
    kept = given_items if first_slip is None else given_items[:first_slip]
    mapping = Mapping.from_config({"name": "Name", "email": "Email"}, where="sources.plugin.mapping")
    with (
        tempfile.TemporaryDirectory() as folder,
        Ledger(Path(folder) / "ledger.sqlite3", synchronous="NORMAL") as ledger,
    ):
        report = RunReport()
        job = SourceJob("plugin", Yields(given_items, raise_at_end), mapping)
        extract(ledger, job, chunk_size, report, NoProgress())  # must not raise, whatever was yielded
        assert report.read == len(kept)
        failed = first_slip is not None or raise_at_end
        assert ("plugin" in report.source_failures) is failed
        if failed:
            assert "\n" not in report.source_failures["plugin"]  # one line
        entries = ledger.list_entries(limit=1000)
        kept_as_given = {
            item.id if isinstance(item, Record) else (item.id or f"@{item.where}")
            for item in kept
            if _good_id(item.id) or (isinstance(item, BadRecord) and item.id is None)
        }
        others = [e for e in entries if e.record_id not in kept_as_given]
        assert kept_as_given <= {e.record_id for e in entries}
        rejected_ids = [
            item for item in kept if not _good_id(item.id) and not (isinstance(item, BadRecord) and item.id is None)
        ]
        assert bool(others) == bool(rejected_ids) and len(others) <= len(rejected_ids)
        assert all(e.state == "rejected" and e.last_error and ID_RULE in e.last_error for e in others), others
        if kept:
            assert ledger.source_state("plugin") == kept[-1].state


def test_a_field_without_a_repr_takes_the_full_path(tmp_path: Path) -> None:
    """An int beyond the interpreter's digit limit has no repr: its record is mapped as any other
    (found by tests/reliability/test_bad_input.py's property once the raw digest came)."""
    huge = Record("1", {"Name": "Ann", "Email": "ann@example.com", "n": 10**5000}, 1)
    mapping = Mapping.from_config({"name": "Name", "email": "Email"}, where="sources.plugin.mapping")
    with Ledger(tmp_path / "ledger.sqlite3", synchronous="NORMAL") as ledger:
        for expected in ((1, 0), (0, 1)):  # read twice: the second is unchanged, by content
            report = RunReport()
            extract(ledger, SourceJob("plugin", Yields([huge], False), mapping), 10, report, NoProgress())
            assert (report.enqueued, report.unchanged) == expected
