"""The built-in `csv` source."""

from __future__ import annotations

import csv
import functools
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from pydantic import Field

from connector.source import SourceError

from ._lines import LineReader, readable, shown
from .files import FileOptions, FileSource, Unreadable

# The csv module's default (128 KiB) would stop a whole source at one long notes field; a field
# beyond this is a clear SourceError naming its line.
FIELD_LIMIT = 64 * 1024 * 1024


class CsvOptions(FileOptions):
    delimiter: str = Field(",", min_length=1, max_length=1, description="The field separator.")


def _ends_in_quotes(text: str, delimiter: str) -> bool:
    """Whether `text` ends inside a quoted field, by the csv module's own (lenient) rules: a quote
    opens a field only at its start, and a doubled quote inside one is a quote."""
    inside = after_quote = False
    at_start = True
    for char in text:
        if inside:
            inside = char != '"'
            after_quote = not inside
        elif after_quote and char == '"':
            inside, after_quote = True, False
        else:
            after_quote = False
            inside = at_start and char == '"'
            at_start = char in (delimiter, "\n", "\r")
    return inside


def _header(fh: BinaryIO, encoding: str, delimiter: str) -> list[str] | None:
    """The first row of a file: the field names (bytes the encoding refused shown as U+FFFD)."""
    fh.seek(0)
    first = next(csv.reader(LineReader(fh, "", encoding, 0, 0), delimiter=delimiter), None)
    return None if first is None else [readable(name) for name in first]


@functools.lru_cache(maxsize=64)
def _row_maker(header: tuple[str, ...]) -> Callable[[list[str]], dict[str, Any]]:
    """`dict(zip(header, row))` for a row exactly as wide as the header, in half the instructions
    (3,900 against 7,100 for the peers' seven fields): a function made once per header that builds
    the dict in one step, where `dict(zip())` makes a pair per field and grows the dict as it goes.
    The names reach it as its globals, never as source text; a repeated name keeps its first place
    and its last value, as `dict(zip())` does. Cached: a glob of many small files shares one."""
    scope: dict[str, Any] = {f"_k{i}": name for i, name in enumerate(header)}
    fields = ", ".join(f"_k{i}: row[{i}]" for i in range(len(header)))
    exec(f"def make(row):\n    return {{{fields}}}\n", scope)
    made: Callable[[list[str]], dict[str, Any]] = scope["make"]
    return made


class CsvSource(FileSource):
    """CSV files (one file or a glob); the first row names the fields."""

    # A row with more values than the header keeps the surplus under "_extra"; one with fewer
    # simply lacks the missing fields. A row with bytes that are not the encoding, one the csv
    # module refuses, or a quoted field still open at the end of a settled file is a bad record
    # (what could be read of it kept for a person to see); the rows after it are read on.

    Options = CsvOptions
    options: CsvOptions

    def columns(self) -> list[str] | None:
        """The header of the first matching file; None when no file matches yet."""
        files = self.files()
        if not files:
            return None
        try:
            with open(files[0].path, "rb") as fh:
                return _header(fh, self.options.encoding, self.options.delimiter)
        except (OSError, csv.Error) as exc:
            raise SourceError(f"cannot read the header of {files[0].rel}: {exc}") from None

    def records(self, fh: BinaryIO, lines: LineReader) -> Iterator[tuple[int, dict[str, Any] | Unreadable]]:
        delimiter = self.options.delimiter
        csv.field_size_limit(max(csv.field_size_limit(), FIELD_LIMIT))  # process-wide in the csv module
        taken: list[str] = []  # the lines of the row being read
        lines.kept = taken
        kept = iter(lines)  # one iterator, the csv reader's and the refused row's below
        rows = csv.reader(kept, delimiter=delimiter)
        if lines.offset == 0:
            first = next(rows, None)
            header = None if first is None else [readable(name) for name in first]
        else:  # resuming inside the file: the header is its first row
            header = _header(fh, lines.encoding, delimiter)
            fh.seek(lines.offset)
        if header is None:
            return
        lines.problem()  # the header's: its names show what could be read
        width = len(header)
        make = _row_maker(tuple(header))
        while True:
            first_line = lines.line + 1
            taken.clear()
            try:
                row = next(rows)
            except StopIteration:
                return
            except csv.Error as exc:
                while _ends_in_quotes("".join(taken), delimiter) and next(kept, None) is not None:
                    pass  # the rest of a quoted field belongs to the refused row, not to new rows
                if not lines.terminated and lines.hold_back():
                    return
                lines.problem()
                yield first_line, Unreadable(f"the csv module refused it ({exc})", shown("".join(taken)))
                continue
            undecodable = lines.problem() if lines.undecodable else None  # nearly always none: no call
            if not row:
                continue
            # A row ends with a newline outside quotes; one that does not is the file's last, maybe still being written
            # (the lenient reader closes a quoted field at the end of the data, so only the last row can be inside one).
            # (`offset >= size`: the last line read reached the end the file had when opened)
            open_quote = lines.offset >= lines.size and _ends_in_quotes("".join(taken), delimiter)
            if (open_quote or not lines.terminated) and lines.hold_back():
                return
            problem = "the file ends inside a quoted field opened here" if open_quote else undecodable
            if problem:
                yield first_line, Unreadable(problem, shown("".join(taken)))
                continue
            if len(row) == width:
                yield first_line, make(row)
                continue
            # zip stops at the shorter: a short row lacks the missing fields (no `strict=False`: a
            # keyword costs the call a slower path, 4 % of reading a row)
            data: dict[str, Any] = dict(zip(header, row))  # noqa: B905
            if len(row) > width:
                data["_extra"] = row[width:]
            yield first_line, data
