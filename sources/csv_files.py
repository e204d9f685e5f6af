"""The built-in `csv` source."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

from pydantic import Field

from connector.source import SourceError

from .files import FileOptions, FileSource, LineReader


# The csv module's default (128 KiB) would stop a whole source at one long notes field; a field
# beyond this is a clear SourceError naming its line.
FIELD_LIMIT = 64 * 1024 * 1024


class CsvOptions(FileOptions):
    delimiter: str = Field(",", min_length=1, max_length=1, description="The field separator.")


def _kept(lines: Iterable[str], into: list[str]) -> Iterator[str]:
    for line in lines:
        into.append(line)
        yield line


def _inside_quotes_at_end(text: str, delimiter: str) -> bool:
    """Whether `text` ends inside a quoted field, which the lenient reader would close silently."""
    try:
        for _ in csv.reader(text.splitlines(keepends=True), delimiter=delimiter, strict=True):
            pass
    except csv.Error as exc:
        return "unexpected end of data" in str(exc)
    return False


class CsvSource(FileSource):
    """CSV files (one file or a glob); the first row names the fields."""

    # A row with more values than the header keeps the surplus under "_extra"; one with fewer
    # simply lacks the missing fields.

    Options = CsvOptions
    options: CsvOptions

    def records(self, fh: BinaryIO, lines: LineReader) -> Iterator[tuple[int, dict[str, Any]]]:
        delimiter = self.options.delimiter
        csv.field_size_limit(max(csv.field_size_limit(), FIELD_LIMIT))  # process-wide in the csv module
        taken: list[str] = []  # the lines of the row being read
        if lines.offset == 0:
            rows = csv.reader(_kept(lines, taken), delimiter=delimiter)
            header = next(rows, None)
        else:  # resuming inside the file: the header is its first row
            fh.seek(0)
            header = next(csv.reader(LineReader(fh, lines.name, lines.encoding, 0, 0), delimiter=delimiter), None)
            fh.seek(lines.offset)
            rows = csv.reader(_kept(lines, taken), delimiter=delimiter)
        if header is None:
            return
        width = len(header)
        while True:
            first_line = lines.line + 1
            taken.clear()
            try:
                row = next(rows)
            except StopIteration:
                return
            except csv.Error as exc:
                raise SourceError(f"{lines.where()}: {exc}") from None
            if not row:
                continue
            # A row ends with a newline outside quotes; one that does not is the file's last, maybe still being written
            # (the lenient reader closes a quoted field at the end of the data, so only the last row can be inside one).
            open_quote = lines.at_end and _inside_quotes_at_end("".join(taken), delimiter)
            if (open_quote or not lines.terminated) and lines.hold_back():
                return
            if open_quote:
                raise SourceError(f"{lines.where()}: the file ends inside a quoted field")
            data: dict[str, Any] = dict(zip(header, row, strict=False))
            if len(row) > width:
                data["_extra"] = row[width:]
            yield first_line, data
