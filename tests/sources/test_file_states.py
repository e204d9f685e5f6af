"""A file source without a cursor vouches for its states (`Source._spells_its_states`), so the plugin
boundary does not walk them: every state it yields, from any folder of files, in either order,
resumed or not, good rows and bad, must then be one the boundary's walk would pass."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from connector.delivery._boundary import Checker
from connector.plugins import build_source
from connector.source import BadRecord, Record

names = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\\*?[]"), min_size=1)
cells = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
files = st.dictionaries(
    names.filter(lambda name: len(name.encode()) < 100),
    st.lists(st.lists(cells, min_size=1, max_size=3), max_size=5),
    min_size=1,
    max_size=4,
)


def _write(folder: Path, name: str, rows: list[list[str]], mtime: int) -> None:
    lines = ["id,name"] + [",".join('"' + cell.replace('"', '""') + '"' for cell in row) for row in rows]
    path = folder / f"{name}.csv"
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
    os.utime(path, (mtime, mtime))


@settings(max_examples=60, deadline=None)
@given(files, st.sampled_from(["name", "mtime"]), st.sampled_from([None, "id"]), st.integers(0, 6))
def test_every_state_a_file_source_spells_passes_the_boundarys_walk(
    contents: dict[str, list[list[str]]], order: str, key: str | None, resume_at: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for i, (name, rows) in enumerate(contents.items()):
            _write(folder, name, rows, 1_000_000 + i)
        options: dict[str, Any] = {"path": str(folder / "*.csv"), "order": order, "settle_s": 0}
        if key:
            options["primary_key"] = key
        source = build_source("s", "csv", options)
        assert source._spells_its_states()
        checker = Checker()
        items = list(source.read(None))
        resumed = list(source.read(items[resume_at].state)) if resume_at < len(items) else []
        for item in items + resumed:
            assert isinstance(item, Record | BadRecord)
            assert checker._state_problem(item.state, ()) is None, item.state


def test_with_a_cursor_the_states_hold_data_and_are_walked(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("id,at\n1,5\n")
    options = {"path": str(tmp_path / "*.csv"), "primary_key": "id", "cursor": "at", "cursor_type": "number"}
    assert not build_source("s", "csv", options)._spells_its_states()
    assert build_source("s", "jsonl", {"path": str(tmp_path / "*.jsonl")})._spells_its_states()


def test_files_named_in_bytes_utf_8_cannot_decode_spell_states_that_pass_the_walk_and_resume_from_json(
    tmp_path: Path,
) -> None:
    """A file name comes from the filesystem as any bytes (surrogate-escaped into str): its states
    still pass the walk, and the state as the ledger keeps it (JSON) resumes where it left off."""
    for raw in (b"\xff\xfe", b"a\xed\xa0\x80b", b"ok-\x1b[31m"):
        (tmp_path / os.fsdecode(raw + b".csv")).write_text("id,name\n1,Ann\n2,Bo\n")
    source = build_source("s", "csv", {"path": str(tmp_path / "*.csv"), "primary_key": "id", "settle_s": 0})
    assert source._spells_its_states()
    checker = Checker()
    items = list(source.read(None))
    assert len(items) == 6
    for at, item in enumerate(items):
        assert checker._state_problem(item.state, ()) is None, item.state
        kept = json.loads(json.dumps(item.state))
        assert [i.id for i in source.read(kept)] == [i.id for i in items[at + 1 :]]


def test_a_subclass_that_reads_in_its_own_way_has_its_states_walked(tmp_path: Path) -> None:
    source = build_source("s", "csv", {"path": str(tmp_path / "*.csv")})

    class Own(type(source)):  # type: ignore[misc]
        def read(self, state: Any | None) -> Any:
            return super().read(state)

    assert not Own("s", source.options)._spells_its_states()
