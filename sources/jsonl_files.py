"""The built-in `jsonl` source."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, BinaryIO

from ._lines import LineReader, shown
from .files import FileSource, Unreadable


def _parse_int(text: str) -> int | Decimal:
    """An integer beyond Python's int/str digit limit is still valid JSON: keep it, exactly, as a Decimal."""
    try:
        return int(text)
    except ValueError:
        return Decimal(text)


# Made once: `json.loads` with an argument makes a decoder per line. The plain one reads integers
# in C; a line with one beyond the digit limit (its ValueError) is read again by the one that keeps it.
_DECODER = json.JSONDecoder()
_BIG_INTS = json.JSONDecoder(parse_int=_parse_int)


def _loads(text: str) -> Any:
    if text.startswith("\ufeff"):  # json.loads' own refusal of a byte order mark, and its message
        return json.loads(text)
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError:
        raise
    except ValueError:
        return _BIG_INTS.decode(text)


class JsonlSource(FileSource):
    """JSON Lines files (one file or a glob): one JSON object per line."""

    # A line that is not valid in the encoding, not JSON, or not an object is a bad record.

    def records(self, fh: BinaryIO, lines: LineReader) -> Iterator[tuple[int, dict[str, Any] | Unreadable]]:
        for text in lines:
            if not text.strip():
                lines.problem()
                continue
            if not lines.terminated and lines.hold_back():
                return
            yield lines.line, _parse(text, lines.problem())


def _parse(text: str, undecodable: str | None) -> dict[str, Any] | Unreadable:
    if undecodable is not None:
        return Unreadable(undecodable, shown(text))
    try:
        data = _loads(text.rstrip("\r\n"))
    except json.JSONDecodeError as exc:  # its own "line 1" would be a second line number
        return Unreadable(f"not valid JSON ({exc.msg} at column {exc.colno})", shown(text))
    if not isinstance(data, dict):
        return Unreadable("not a JSON object", shown(text))
    return data
