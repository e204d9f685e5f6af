"""The built-in `jsonl` source."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, BinaryIO

from connector.source import SourceError

from .files import FileSource, LineReader


def _parse_int(text: str) -> int | Decimal:
    """An integer beyond Python's int/str digit limit is still valid JSON: keep it, exactly, as a Decimal."""
    try:
        return int(text)
    except ValueError:
        return Decimal(text)


class JsonlSource(FileSource):
    """JSON Lines files (one file or a glob): one JSON object per line."""

    def records(self, fh: BinaryIO, lines: LineReader) -> Iterator[tuple[int, dict[str, Any]]]:
        for text in lines:
            if not text.strip():
                continue
            if not lines.terminated and lines.hold_back():
                return
            try:
                data = json.loads(text, parse_int=_parse_int)
            except ValueError as exc:
                raise SourceError(f"{lines.where()}: not valid JSON ({exc})") from None
            if not isinstance(data, dict):
                raise SourceError(f"{lines.where()}: not a JSON object")
            yield lines.line, data
