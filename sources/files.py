"""What the csv and jsonl sources share: a file or a glob of files, read as a stream of lines with
the byte offset after each record, incremental by a cursor column or by new rows and new files.

Files are read in name order. Without a cursor the state is `{"file", "offset", "line", "tail"}` of
the last record: rows appended to that file and files whose names sort after it are new (so name
new files so that they sort last, e.g. by date). `tail` is the length and CRC-32 of the line that
ends at the offset: when those bytes differ on the next read, the file was replaced (rewritten,
rotated, regenerated) and is read again from its start instead of from the middle of a line (with
a cursor, rows of that file already taken in an interrupted pass may then come again; the ledger
sees their content unchanged).
"""

from __future__ import annotations

import codecs
import glob
import os
import zlib
from abc import abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

from pydantic import Field, field_validator, model_validator

from connector.source import ConfigPath, Record, Source, SourceError, SourceOptions

from .incremental import CursorType, Row, cursor_key, read_incremental


class FileOptions(SourceOptions):
    path: ConfigPath = Field(description="A file, or a glob of files (e.g. `data/signups-*.csv`, `exports/**/*.jsonl`).")
    encoding: str = Field("utf-8", description="Text encoding; a UTF-8 byte order mark is skipped.")
    primary_key: str | None = Field(
        None, description="Field holding a stable record id; default: file name and line number."
    )
    cursor: str | None = Field(
        None, description="Field to read incrementally by (needs primary_key); default: new rows and files."
    )
    cursor_type: CursorType = Field("string", description="How cursor values compare: string, number or datetime.")

    @field_validator("encoding")
    @classmethod
    def _line_based_encoding(cls, value: str) -> str:
        try:
            codecs.lookup(value)
        except LookupError:
            raise ValueError(f"unknown encoding {value!r}") from None
        if "\n".encode(value) != b"\n":
            raise ValueError(f"encoding {value!r} is not supported: use an ASCII-compatible one (utf-8, latin-1, cp1252)")
        return value

    @model_validator(mode="after")
    def _cursor_needs_key(self) -> FileOptions:
        if self.cursor is not None and self.primary_key is None:
            raise ValueError("`cursor` needs `primary_key`: rows sharing a cursor value are told apart by their id")
        return self


class LineReader:
    """Decoded lines of a binary file, counting the bytes and lines consumed so far."""

    def __init__(self, fh: BinaryIO, name: str, encoding: str, offset: int, line: int) -> None:
        self.fh, self.name, self.encoding = fh, name, encoding
        self.offset, self.line = offset, line
        self.tail = (0, 0)  # length and CRC-32 of the last line read
        self.terminated = True  # whether the last line read ended with a newline
        self._strip_bom = offset == 0 and codecs.lookup(encoding).name.startswith("utf-8")

    def __iter__(self) -> Iterator[str]:
        for raw in self.fh:
            self.offset += len(raw)
            self.line += 1
            self.tail = (len(raw), zlib.crc32(raw))
            self.terminated = raw.endswith(b"\n")
            if self._strip_bom:
                raw = raw.removeprefix(codecs.BOM_UTF8)
                self._strip_bom = False
            try:
                yield raw.decode(self.encoding)
            except UnicodeDecodeError as exc:
                raise SourceError(f"{self.where()}: not valid {self.encoding} ({exc.reason})") from None

    def where(self) -> str:
        return f"{self.name} line {self.line}"


def _glob_base(pattern: str) -> str:
    """The directory part before the first wildcard: file names are relative to it, so the ids and
    the state survive a moved data directory."""
    parts = Path(pattern).parts
    first_magic = next((i for i, p in enumerate(parts) if glob.has_magic(p)), len(parts) - 1)
    return str(Path(*parts[:first_magic])) if first_magic else "."


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

    def read(self, state: Any | None) -> Iterator[Record]:
        key = cursor_key(self.options.cursor_type) if self.options.cursor else None
        return read_incremental(state, self._scan, key=key)

    def check(self) -> None:
        files = self.files()
        if not files:
            raise SourceError(f"no file matches {self.options.path!r}")
        for rel, path in files:
            if not os.access(path, os.R_OK):
                raise SourceError(f"{rel} is not readable")

    def files(self) -> list[tuple[str, str]]:
        """(name relative to the glob's base, path) of every matching file, in name order."""
        base = _glob_base(self.options.path)
        matches = glob.glob(self.options.path, recursive=True)
        return sorted((os.path.relpath(m, base), m) for m in matches if os.path.isfile(m))

    @abstractmethod
    def records(self, fh: BinaryIO, lines: LineReader) -> Iterator[tuple[int, dict[str, Any]]]:
        """(first line, fields) of each record from `lines`; `fh` is the open file."""

    def _scan(self, position: dict[str, Any] | None, since: Any) -> Iterator[Row]:
        for rel, path in self.files():
            if position is None or rel > position["file"]:
                yield from self._scan_file(rel, path, None)
            elif rel == position["file"]:
                yield from self._scan_file(rel, path, position)

    def _scan_file(self, rel: str, path: str, position: dict[str, Any] | None) -> Iterator[Row]:
        opts = self.options
        try:
            fh = open(path, "rb")  # noqa: SIM115 - closed by the with below, across yields
        except OSError as exc:
            raise SourceError(f"cannot open {rel}: {exc.strerror}") from None
        with fh:
            offset, line = (position["offset"], position["line"]) if position and _same_tail(fh, position) else (0, 0)
            fh.seek(offset)
            lines = LineReader(fh, rel, opts.encoding, offset, line)
            for first_line, data in self.records(fh, lines):
                if opts.primary_key is None:
                    record_id = f"{rel}:{first_line}"
                else:
                    value = data.get(opts.primary_key)
                    if value is None or value == "":
                        raise SourceError(f"{rel} line {first_line}: no value in primary key {opts.primary_key!r}")
                    record_id = str(value)
                cursor = data.get(opts.cursor) if opts.cursor else None
                position = {"file": rel, "offset": lines.offset, "line": lines.line, "tail": lines.tail}
                yield Row(record_id, data, position, cursor)
