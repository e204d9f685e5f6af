"""Reading a file as decoded lines for the line-based sources: the byte offset, line number and tail
(length and CRC-32 of the last line) after each line, bytes the encoding refuses kept as lone
surrogates and reported, a UTF-8 byte order mark skipped, and an unfinished last line held back while
the file is still being written. `readable` and `shown` turn what was read into text a person can see."""

from __future__ import annotations

import codecs
import os
import re
import zlib
from collections.abc import Iterator
from typing import Any, BinaryIO

from connector import logs

log = logs.get_logger("capture_sync.sources")

_ESCAPED = re.compile("[\udc80-\udcff]")


def readable(text: str) -> str:
    """`text` with the bytes the encoding refused (kept as lone surrogates) shown as U+FFFD, so it
    can be stored and printed."""
    return _ESCAPED.sub("\ufffd", text)


LINE_SHOWN = 1000


def shown(text: str) -> dict[str, Any]:
    """What is kept of a bad record for a person to see: its text, up to LINE_SHOWN characters."""
    return {"line": readable(text.rstrip("\r\n")[:LINE_SHOWN])}


class LineReader:
    """Decoded lines of a binary file, counting the bytes and lines consumed so far.

    A line that is not valid in the encoding is still yielded, its bad bytes kept as lone
    surrogates (which no valid text holds) and its number and reason noted in `undecodable`:
    the parser keeps its bearings (a csv quote or delimiter is ASCII) and the record it belongs
    to is reported, not the rest of the file."""

    __slots__ = (
        "_strip_bom",
        "encoding",
        "fh",
        "held_back",
        "kept",
        "line",
        "name",
        "offset",
        "settled",
        "size",
        "tail",
        "terminated",
        "undecodable",
    )

    def __init__(self, fh: BinaryIO, name: str, encoding: str, offset: int, line: int, settled: bool = True) -> None:
        self.fh, self.name, self.encoding = fh, name, encoding
        self.offset, self.line = offset, line
        self.settled = settled  # whether the file has been unmodified for settle_s
        self.size = os.fstat(fh.fileno()).st_size  # at open: a line ending at or past it may be unfinished
        self.tail = (0, 0)  # length and CRC-32 of the last line read
        self.terminated = True  # whether the last line read ended with a newline
        self.held_back = False  # whether hold_back() left the last record for a later read
        self.undecodable: list[tuple[int, str]] = []  # (line, reason) of lines not valid in the encoding
        # Where each line is also put as it is yielded, if anywhere (the csv source keeps a row's lines
        # to show a bad one): set before iterating. Here rather than in a generator around this one.
        self.kept: list[str] | None = None
        self._strip_bom = offset == 0 and codecs.lookup(encoding).name.startswith("utf-8")

    def __iter__(self) -> Iterator[str]:
        kept, encoding, strip_bom = self.kept, self.encoding, self._strip_bom
        for raw in self.fh:
            size = len(raw)
            self.offset += size
            self.line += 1
            self.tail = (size, zlib.crc32(raw))
            self.terminated = raw.endswith(b"\n")
            if strip_bom:  # a local: asked per line
                raw = raw.removeprefix(codecs.BOM_UTF8)
                strip_bom = self._strip_bom = False
            try:
                text = raw.decode(encoding)
            except UnicodeDecodeError as exc:
                self.undecodable.append((self.line, f"line {self.line} is not valid {encoding} ({exc.reason})"))
                text = raw.decode(encoding, "surrogateescape")
            if kept is not None:
                kept.append(text)
            yield text

    def problem(self) -> str | None:
        """Why the lines read since the last call cannot be trusted, if any; forgets them."""
        if not self.undecodable:  # nearly always: asked once per record
            return None
        reasons = "; ".join(reason for _, reason in self.undecodable)
        self.undecodable.clear()
        return reasons or None

    def where(self) -> str:
        return f"{self.name} line {self.line}"

    def hold_back(self) -> bool:
        """For a last record with no end yet: whether to leave it for a later read. Yes while the file
        is still being written to (its end may follow); no once it has settled (an export without a
        final newline), so that last record is never held back for good. A held-back record ends the
        scan: nothing after it is read in this pass."""
        if self.settled:
            return False
        self.held_back = True
        log.warning(
            "source.line_held_back",
            file=self.name,
            line=self.line,
            reason="no newline yet; read once complete or settled",
        )
        return True
