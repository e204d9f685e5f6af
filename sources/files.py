"""What the csv and jsonl sources share: a file or a glob of files, read as a stream of lines with
the byte offset after each record, incremental by a cursor column or by new rows and new files.

Files are read in natural name order (`export-9` before `export-10`), or by modification time with
`order = "mtime"`. Without a cursor the state is `{"file", "offset", "line", "tail", "order", "done"}`
of the last record (with `"mtime"` in mtime order): rows appended to that file are new, and so is
every file not in `done`, the fingerprints (name, size, inode, modification time) of the files read
to their end. The order says only which file comes first: a file that arrives late with an older
modification time (`mv`, `cp -p`, `rsync -t` and `tar x` keep it) or a name that sorts first is read,
and a file changed after it was read is read again from its start. `tail` is the length and CRC-32 of the line
that ends at the offset: when those bytes differ on the next read, the file was replaced (rewritten,
rotated, regenerated) and is read again from its start instead of from the middle of a line (with a
cursor, rows of that file already taken in an interrupted pass may then come again; the ledger sees
their content unchanged). A saved position is compared in the order it was saved in, and a position
saved before `order` existed (when names compared as plain strings) counts a file as after it when it
is after in plain or in natural order, so a changed order may repeat a file (which the ledger finds
unchanged) but never skips one.

A record the file cannot give (bytes that are not the encoding, a line the format refuses, no
value in the primary key) is yielded as a `BadRecord` at "<file> line N" and the lines after it
are read on. Its id is "<file>:<line>" (the id of every record without a primary_key), or its
primary key when only its cursor value is unusable, so a line fixed in place is a new version of it.

A last line without its newline may be a line still being written: it is held back (with a warning)
while the file was modified within `settle_s`, and taken once the file has been quiet that long, so
an export without a final newline still delivers its last record. A held-back line ends the read:
no file after it is read, the state stays before it, and with a cursor the pass does not end there
(its last record keeps an in-pass state), so the line is read once complete whatever its cursor value.
"""

from __future__ import annotations

import codecs
import glob
import hashlib
import os
import re
import time
import zlib
from abc import abstractmethod
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, BinaryIO, ClassVar, Literal, NamedTuple, TypeVar, cast

from pydantic import Field, field_validator

from connector.incremental import (
    HELD_BACK,
    CursorOptions,
    HeldBack,
    Row,
    cursor_key,
    item_of,
    lookback_amount,
    read_incremental,
)
from connector.source import BadRecord, ConfigPath, Item, Record, Source, SourceError, new_record

from ._lines import LineReader

FileOrder = Literal["name", "mtime"]
Made = TypeVar("Made")
# What a scan makes of a row from (id, data, position, cursor, where, problem): a Row for a cursor
# pass, or, without a cursor, the item itself (its state is its position).
Make = Callable[[str, dict[str, Any], Any, Any, str, "str | None"], Made]


class FileOptions(CursorOptions):
    path: ConfigPath = Field(
        description="A file, or a glob of files (e.g. `data/signups-*.csv`, `exports/**/*.jsonl`)."
    )
    encoding: str = Field("utf-8", description="Text encoding; a UTF-8 byte order mark is skipped.")
    order: FileOrder = Field(
        "name",
        description="Order of the files of a glob: name (natural: export-9 before export-10) or mtime (oldest first).",
    )
    settle_s: float = Field(
        60.0,
        ge=0,
        description="A last line without its newline is held back until the file has been unmodified this long.",
    )

    @field_validator("encoding")
    @classmethod
    def _line_based_encoding(cls, value: str) -> str:
        try:
            codecs.lookup(value)
        except LookupError:
            raise ValueError(f"unknown encoding {value!r}") from None
        if "\n".encode(value) != b"\n":
            raise ValueError(
                f"encoding {value!r} is not supported: use an ASCII-compatible one (utf-8, latin-1, cp1252)"
            )
        return value


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A record `records()` could not make sense of: why, and what could be read of it."""

    reason: str
    raw: dict[str, Any] | None = None


def _glob_base(pattern: str) -> str:
    """The directory part before the first wildcard: file names are relative to it, so the ids and
    the state survive a moved data directory."""
    parts = Path(pattern).parts
    first_magic = next((i for i, p in enumerate(parts) if glob.has_magic(p)), len(parts) - 1)
    return str(Path(*parts[:first_magic])) if first_magic else "."


class Match(NamedTuple):
    rel: str  # name relative to the glob's base
    path: str
    mtime_ns: int
    size: int = 0
    inode: int = 0

    def fingerprint(self) -> str:
        """This file as read to its end: its name, size, inode and modification time, hashed to 12
        hex digits so that a folder of many thousands of files keeps a small state. A file moved in,
        appended to or rewritten has another."""
        material = f"{self.rel}\x1f{self.size}\x1f{self.inode}\x1f{self.mtime_ns}".encode("utf-8", "surrogateescape")
        return hashlib.blake2b(material, digest_size=6).hexdigest()


def _natural(name: str) -> tuple[Any, ...]:
    """Name order for people: digit runs compare as numbers (`export-9` before `export-10`); the
    name itself breaks ties (`01` and `1`)."""
    parts = re.split(r"(\d+)", name)
    return (tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), name)


def _after(match: Match, position: dict[str, Any]) -> bool:
    """Whether a file comes after the saved one, in the order the position was saved in. In mtime
    order an equal time counts as after: a coarse clock can give a file changed after it was read
    the saved time, and reading it again is safe where skipping it is not."""
    order = position.get("order")
    if order == "mtime":
        return match.mtime_ns >= position["mtime"]
    if order == "name":
        return _natural(match.rel) > _natural(position["file"])
    # Saved before natural order, by a version that read in plain string order: after in either order,
    # so no file is skipped (export-10 after export-9, and export-2 after export-10); a repeat is safe.
    return match.rel > position["file"] or _natural(match.rel) > _natural(position["file"])


def _same_tail(fh: BinaryIO, position: dict[str, Any]) -> bool:
    """Whether the line that ended at the saved offset is still there, byte for byte. A state saved
    before `tail` was recorded can only be checked by size: the file must still reach the offset."""
    if "tail" not in position:
        return os.fstat(fh.fileno()).st_size >= position["offset"]
    length, crc = position["tail"]
    if position["offset"] < length:
        return False
    fh.seek(position["offset"] - length)
    return zlib.crc32(fh.read(length)) == crc


class FileSource(Source[FileOptions]):
    """Base of the line-based file sources; a subclass parses one file's records."""

    Options: ClassVar[type[FileOptions]] = FileOptions

    def read(self, state: Any | None) -> Iterator[Item]:
        opts = self.options
        if not opts.cursor:  # each record's state is its position: made at once, without a Row per record between
            return cast(Iterator[Item], self._scan(state, _item, marked=False))  # unmarked: it yields no HeldBack
        return read_incremental(
            state,
            lambda position, since: self._scan(position, Row),
            key=cursor_key(opts.cursor_type),
            lookback=lookback_amount(opts.lookback),
        )

    def check(self) -> None:
        files = self.files()
        if not files:
            raise SourceError(f"no file matches {self.options.path!r}")
        for match in files:
            if not os.access(match.path, os.R_OK):
                raise SourceError(f"{match.rel} is not readable")

    def _spells_its_states(self) -> bool:
        """Without a cursor each state is a position this class makes from the file's name, numbers and
        its list of fingerprints (tests/sources/test_csv.py walks them as the boundary would); with
        one, the state holds cursor values read from the data, and is checked; so is a subclass's
        (a plugin's) that reads in its own way."""
        return not self.options.cursor and type(self).read is FileSource.read

    def fingerprint(self) -> str | None:
        prints = "\n".join(match.fingerprint() for match in self.files())
        return hashlib.blake2b(prints.encode("ascii"), digest_size=16).hexdigest()

    def files(self) -> list[Match]:
        """Every matching file, in the configured order."""
        base = _glob_base(self.options.path)
        found = []
        for path in glob.glob(self.options.path, recursive=True):
            try:
                stat = os.stat(path)
            except OSError:
                continue  # removed since the glob
            if os.path.isfile(path):
                found.append(Match(os.path.relpath(path, base), path, stat.st_mtime_ns, stat.st_size, stat.st_ino))
        if self.options.order == "mtime":
            return sorted(found, key=lambda m: (m.mtime_ns, _natural(m.rel)))
        return sorted(found, key=lambda m: _natural(m.rel))

    @abstractmethod
    def records(self, fh: BinaryIO, lines: LineReader) -> Iterator[tuple[int, dict[str, Any] | Unreadable]]:
        """(first line, fields) of each record from `lines`, or (first line, Unreadable) for one it
        cannot parse; `fh` is the open file."""

    def _scan(
        self, position: dict[str, Any] | None, make: Make[Made], marked: bool = True
    ) -> Iterator[Made | HeldBack]:
        """Every file not yet read to its end, whatever its place in the order: the position's file
        from its offset, the others from their start. A file counts as read when its fingerprint is
        in the position's `done` (kept only for files that still match, so it stays as small as the
        folder); a position saved before `done` existed counts the files before it in its order.
        Each row is yielded as `make` makes it; a held-back line ends the scan, `marked` with HELD_BACK
        (a read without a cursor has no pass to keep open, so it simply ends)."""
        files = self.files()
        prints = {match.rel: match.fingerprint() for match in files}
        done: frozenset[str] = frozenset()
        legacy = False
        if position is not None:
            legacy = "done" not in position
            done = frozenset(position.get("done", ())) & frozenset(prints.values())
        for match in files:
            fingerprint = prints[match.rel]
            if position is not None and match.rel == position["file"]:
                held_back = yield from self._scan_file(match, position, done, make)
            elif position is None or not (fingerprint in done or (legacy and not _after(match, position))):
                held_back = yield from self._scan_file(match, None, done, make)
            else:
                done |= {fingerprint}  # a legacy position's earlier file: read, so say so from here on
                continue
            if held_back:  # the files after it wait for it, so the state never passes it
                if marked:
                    yield HELD_BACK
                return
            done |= {fingerprint}

    def _scan_file(
        self, match: Match, position: dict[str, Any] | None, done: frozenset[str], make: Make[Made]
    ) -> Generator[Made, None, bool]:
        """The rows of one file from `position`; returns whether its last line was held back. `done`
        (the files read to their end before it) goes into every row's position, as a sorted list."""
        opts, rel = self.options, match.rel
        try:
            fh = open(match.path, "rb")  # noqa: SIM115 - closed by the with below, across yields
        except OSError as exc:
            raise SourceError(f"cannot open {rel}: {exc.strerror}") from None
        with fh:
            offset, line = (position["offset"], position["line"]) if position and _same_tail(fh, position) else (0, 0)
            fh.seek(offset)
            settled = time.time() - os.fstat(fh.fileno()).st_mtime >= opts.settle_s
            lines = LineReader(fh, rel, opts.encoding, offset, line, settled)
            order: dict[str, Any] = (
                {"order": "mtime", "mtime": match.mtime_ns} if opts.order == "mtime" else {"order": "name"}
            )
            # every row's position is a copy of this one with its own offset, line and tail: a copy of a
            # dict is half the cost of building one from its keys
            template = {"file": rel, "offset": 0, "line": 0, "tail": (0, 0), **order, "done": sorted(done)}
            cursor_name, key_name = opts.cursor, opts.primary_key
            # A name from the filesystem may hold bytes UTF-8 cannot decode (surrogate-escaped) or control
            # characters, which no record id may: such a name is spelled escaped in the ids (a name that
            # can be an id is spelled as it is, so no existing entry's id changes).
            named = rel if rel.isprintable() else ascii(rel)[1:-1]
            # A read without a cursor makes its records itself: `new_record` without `_item`'s call between.
            direct = make is _item
            record = cast(Callable[[str, dict[str, Any], Any, str, None], Made], new_record)
            # Each row made here, not in a method per row (with the template: 9 % of a csv row's instructions).
            for first_line, data in self.records(fh, lines):
                position = template.copy()
                position["offset"], position["line"], position["tail"] = lines.offset, lines.line, lines.tail
                where = f"{rel} line {first_line}"
                if isinstance(data, Unreadable):
                    yield make(f"{named}:{first_line}", data.raw or {}, position, None, where, data.reason)
                    continue
                cursor = data.get(cursor_name) if cursor_name else None
                if key_name is None:
                    rid = f"{named}:{first_line}"
                    yield (
                        record(rid, data, position, where, None)
                        if direct
                        else make(rid, data, position, cursor, where, None)
                    )
                    continue
                value = data.get(key_name)
                if type(value) is str and value.strip():  # nearly every key is text: told without a call
                    yield (
                        record(value, data, position, where, None)
                        if direct
                        else make(value, data, position, cursor, where, None)
                    )
                    continue
                # the line names only a record without a usable key
                problem = _key_problem(value, key_name)
                yield make(f"{named}:{first_line}" if problem else str(value), data, position, cursor, where, problem)
        return lines.held_back


def _item(
    id: str, data: dict[str, Any], position: Any, cursor: Any, where: str, problem: str | None
) -> Record | BadRecord:
    """A row without a cursor as its item, its position the state after it: `item_of`, a record made
    without the calls between."""
    if problem is None:
        return new_record(id, data, position, where, None)
    return item_of(id, data, position, where, problem)


def _key_problem(value: Any, name: str) -> str | None:
    """Why `value` cannot be a record id: missing, blank, or not a string or a number."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return f"no value in primary key {name!r}"
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        return f"primary key {name!r} holds a {type(value).__name__}, not a string or a number"
    return None
