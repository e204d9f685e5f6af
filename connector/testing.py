"""The plugin kit: a contract test any source passes before it is trusted with a ledger.

    from connector.testing import SourceContract

    class TestMySource(SourceContract):
        source_type = "my-type"            # as written in a config: entry-point name or "pkg.mod:Class"

        @pytest.fixture
        def source_options(self, tmp_path):  # options of a source holding at least 3 records
            ...

        def add_records(self, options):      # optional: add new records to the source's data
            ...

        def bad_options(self, options):      # optional: options of data holding records it cannot read
            ...

It proves what the ledger relies on: ids are stable, unique and ones it can keep (`ID_RULE`); reading resumes from every
record's state (after a JSON round trip, as the ledger stores it) with no gap, and with no repeat
inside a read; a read cut short resumes exactly after its last record; unknown options are refused,
check() works; a `fingerprint()`, when given, changes with the data. The state after a read's last
record may read some records again (a cursor source re-reads its boundary value, where an edit may
not have moved the cursor): those and new records only, never a gap; the ledger drops a repeated
record whose content did not change.

With `bad_options`, it also proves that a record the source cannot read comes as a `BadRecord`
(not an exception) with a reason and a position, among the good records, and that resuming from
its state goes on after it. A source whose `columns()` says its fields must give them in every record.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

import pytest

from .delivery._boundary import ID_RULE, id_problem, shown_id
from .plugins import build_source
from .problems import ConfigProblem
from .source import BadRecord, Passed, Record, Source, SourceError


def _stored(state: Any) -> Any:
    """The state as the ledger gives it back."""
    return json.loads(json.dumps(state))


def _told(items: Sequence[Record | BadRecord]) -> list[tuple[Any, ...]]:
    """What a read told, good and bad records alike, without the states."""
    return [(r.id, r.data) if isinstance(r, Record) else ("bad", r.id, r.where, r.reason) for r in items]


class SourceContract:
    source_type: ClassVar[str]
    min_records: ClassVar[int] = 3

    @pytest.fixture
    def source_options(self) -> dict[str, Any]:
        raise NotImplementedError("define a `source_options` fixture returning valid options")

    def add_records(self, options: dict[str, Any]) -> None:
        """Add at least one record the source has not yielded yet."""
        pytest.skip("add_records is not implemented for this source")

    def invalid_options(self, options: dict[str, Any]) -> list[dict[str, Any]]:
        """Option sets that validation must refuse, besides an unknown key."""
        return []

    def broken_options(self, options: dict[str, Any]) -> dict[str, Any] | None:
        """Options that validate but point at nothing usable: check() must raise SourceError."""
        return None

    def bad_options(self, options: dict[str, Any]) -> dict[str, Any] | None:
        """Options of a source whose data holds, among good records, at least one record it cannot
        read (not valid in its encoding, malformed, without an id): each must come as a BadRecord."""
        return None

    def build(self, options: dict[str, Any]) -> Source:
        return build_source("contract", self.source_type, options)

    def read(self, options: dict[str, Any], state: Any = None) -> list[Record | BadRecord]:
        """What a read yields, without the rows it passed over below its cursor (`Passed`)."""
        source = self.build(options)
        try:
            return [item for item in source.read(state) if not isinstance(item, Passed)]
        finally:
            source.close()

    @pytest.fixture
    def records(self, source_options: dict[str, Any]) -> list[Record]:
        records = self.read(source_options)
        assert len(records) >= self.min_records, "the test data should hold at least 3 records"
        bad = [r for r in records if isinstance(r, BadRecord)]
        assert not bad, f"the test data of source_options should read without bad records: {bad[:3]}"
        return [r for r in records if isinstance(r, Record)]

    @pytest.fixture
    def bad_read(self, source_options: dict[str, Any]) -> tuple[dict[str, Any], list[Record | BadRecord]]:
        options = self.bad_options(source_options)
        if options is None:
            pytest.skip("bad_options is not implemented for this source")
        return options, self.read(options)

    def test_unknown_option_is_refused(self, source_options: dict[str, Any]) -> None:
        with pytest.raises(ConfigProblem) as info:
            self.build({**source_options, "no_such_option": 1})
        assert any("no_such_option" in p for p in info.value.problems)

    def test_invalid_options_are_refused(self, source_options: dict[str, Any]) -> None:
        for bad in self.invalid_options(source_options):
            try:
                self.build(bad)
            except ConfigProblem:
                continue
            pytest.fail(f"these options were accepted: {bad}")

    def test_check_accepts_working_options(self, source_options: dict[str, Any]) -> None:
        source = self.build(source_options)
        source.check()
        source.close()
        source.close()

    def test_check_reports_unusable_options(self, source_options: dict[str, Any]) -> None:
        broken = self.broken_options(source_options)
        if broken is None:
            pytest.skip("broken_options is not implemented for this source")
        with pytest.raises(SourceError):
            self.build(broken).check()

    def test_columns_when_given_are_fields_every_record_has(
        self, source_options: dict[str, Any], records: list[Record]
    ) -> None:
        source = self.build(source_options)
        try:
            columns = source.columns()
        finally:
            source.close()
        if columns is None:
            pytest.skip("this source cannot know its columns before reading")
        assert all(isinstance(c, str) for c in columns) and len(set(columns)) == len(columns), columns
        for record in records:
            missing = set(columns) - set(record.data)
            assert not missing, f"record {record.id!r} lacks the columns {sorted(missing)} that columns() declares"

    def test_bad_records_come_among_the_good_with_a_reason_and_a_position(
        self, bad_read: tuple[dict[str, Any], list[Record | BadRecord]]
    ) -> None:
        _, items = bad_read
        bad = [r for r in items if isinstance(r, BadRecord)]
        assert bad, "bad_options should hold a record the source cannot read, yielded as a BadRecord"
        assert any(isinstance(r, Record) for r in items), "bad_options should hold good records too"
        for record in bad:
            assert record.reason.strip() and record.where.strip(), record
            assert record.id is None or id_problem(record.id, "") is None, record
            assert _stored(record.raw) == record.raw, "raw must be JSON, as the ledger stores it"
            assert _stored(record.state) is not None

    def test_resuming_after_a_bad_record_goes_on_after_it(
        self, bad_read: tuple[dict[str, Any], list[Record | BadRecord]]
    ) -> None:
        options, items = bad_read
        told = _told(items)
        for k, record in enumerate(items[:-1]):
            if isinstance(record, BadRecord):
                assert _told(self.read(options, _stored(record.state))) == told[k + 1 :], f"after {record.where}"

    def test_ids_are_unique_and_states_are_json(self, records: list[Record]) -> None:
        assert len({r.id for r in records}) == len(records)
        for record in records:
            problem = id_problem(record.id, f"record id {shown_id(record.id)}")
            assert problem is None, f"{problem}: capture-sync would reject the record ({ID_RULE})"
            assert isinstance(record.data, dict)
            assert _stored(record.state) is not None

    def test_a_second_read_gives_the_same_records(self, source_options: dict[str, Any], records: list[Record]) -> None:
        assert _told(self.read(source_options)) == _told(records)

    def test_resumes_inside_a_read_from_every_state_without_gap_or_repeat(
        self, source_options: dict[str, Any], records: list[Record]
    ) -> None:
        expected = _told(records)
        for k, record in enumerate(records[:-1]):
            assert _told(self.read(source_options, _stored(record.state))) == expected[k + 1 :], f"after record {k}"

    def test_the_last_state_reads_again_at_most_a_settled_boundary(
        self, source_options: dict[str, Any], records: list[Record]
    ) -> None:
        again = self.read(source_options, _stored(records[-1].state))
        assert {r.id for r in again} <= {r.id for r in records}, "nothing changed, so nothing new may come"
        if again:  # reading from the boundary's own end state gives that boundary, not more each time
            assert {r.id for r in self.read(source_options, _stored(again[-1].state))} == {r.id for r in again}

    def test_an_interrupted_read_resumes_after_its_last_record(
        self, source_options: dict[str, Any], records: list[Record]
    ) -> None:
        source = self.build(source_options)
        stream = (item for item in source.read(None) if not isinstance(item, Passed))
        taken = [next(stream), next(stream)]
        stream.close()  # type: ignore[attr-defined]  # the engine stopping between chunks
        source.close()
        rest = self.read(source_options, _stored(taken[-1].state))
        assert _told(taken + rest) == _told(records)

    def test_reads_what_is_new_and_repeats_at_most_the_boundary(
        self, source_options: dict[str, Any], records: list[Record]
    ) -> None:
        boundary = {r.id for r in self.read(source_options, _stored(records[-1].state))}
        self.add_records(source_options)
        new = self.read(source_options, _stored(records[-1].state))
        old = {r.id for r in records}
        assert {r.id for r in new} - old, "add_records added records, so reading from the last state must yield them"
        assert {r.id for r in new} & old <= boundary, "only what the last state reads again may come again"
        assert {r.id for r in self.read(source_options, _stored(new[-1].state))} <= {r.id for r in new}
        everything = {r.id for r in self.read(source_options)}
        assert everything == old | {r.id for r in new}

    def test_a_fingerprint_when_given_is_stable_and_follows_new_records(
        self, source_options: dict[str, Any], records: list[Record]
    ) -> None:
        """`fingerprint()` lets a snapshot pass skip data it read whole last time: it must not change
        while the data does not, and must change once records are added (else they would be skipped)."""
        source = self.build(source_options)
        try:
            first, again = source.fingerprint(), source.fingerprint()
        finally:
            source.close()
        if first is None:
            pytest.skip("this source gives no fingerprint")
        assert isinstance(first, str) and first == again
        self.add_records(source_options)
        later = self.build(source_options)
        try:
            assert later.fingerprint() != first, "add_records changed the data, so the fingerprint must change"
        finally:
            later.close()
