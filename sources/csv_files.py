"""The built-in `csv` source."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import Any, BinaryIO

from pydantic import Field

from connector.source import SourceError

from .files import FileOptions, FileSource, LineReader


class CsvOptions(FileOptions):
    delimiter: str = Field(",", min_length=1, max_length=1, description="The field separator.")


class CsvSource(FileSource):
    """CSV files (one file or a glob); the first row names the fields."""

    # A row with more values than the header keeps the surplus under "_extra"; one with fewer
    # simply lacks the missing fields.

    Options = CsvOptions
    options: CsvOptions

    def records(self, fh: BinaryIO, lines: LineReader) -> Iterator[tuple[int, dict[str, Any]]]:
        delimiter = self.options.delimiter
        if lines.offset == 0:
            rows = csv.reader(lines, delimiter=delimiter)
            header = next(rows, None)
        else:  # resuming inside the file: the header is its first row
            fh.seek(0)
            header = next(csv.reader(LineReader(fh, lines.name, lines.encoding, 0, 0), delimiter=delimiter), None)
            fh.seek(lines.offset)
            rows = csv.reader(lines, delimiter=delimiter)
        if header is None:
            return
        width = len(header)
        while True:
            first_line = lines.line + 1
            try:
                row = next(rows)
            except StopIteration:
                return
            except csv.Error as exc:
                raise SourceError(f"{lines.where()}: {exc}") from None
            if not row:
                continue
            if not lines.terminated and len(row) < width:
                return  # a last line still being written: read it once it is complete
            data: dict[str, Any] = dict(zip(header, row, strict=False))
            if len(row) > width:
                data["_extra"] = row[width:]
            yield first_line, data
