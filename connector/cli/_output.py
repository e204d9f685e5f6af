"""What the commands print. Machine-readable output: `--json` prints exactly one JSON object on stdout
and nothing else there, so `capture-sync sync --json | jq .exit_code` works in a script; human lines
go to stderr. And all of it inert: every string a console renders, every table cell, every JSON
document passes `logs.inert`, so a value from outside (an API's client name or error, a source's
data) cannot drive the terminal; a command cannot forget, as it never calls it itself.
"""

from __future__ import annotations

import sys
from json import dumps, loads
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.highlighter import JSONHighlighter

from .. import logs

if TYPE_CHECKING:
    from rich.text import Text


class InertConsole(Console):
    """A rich console whose text is inert: rich turns every string it prints, a table cell included,
    into Text through `render_str`, so that is where control characters are escaped."""

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(logs.inert(text), **options)

    def print_json(self, json: str | None = None, *, data: Any = None, indent: int | str | None = 2, **_: Any) -> None:
        """As rich's, escaped after pretty-printing (rich's re-encoding writes C1 characters raw)."""
        value = loads(json) if json is not None else data
        text = JSONHighlighter()(logs.inert(dumps(value, indent=indent, ensure_ascii=False, default=str)))
        text.no_wrap, text.overflow = True, None
        self.print(text, soft_wrap=True)


def emit_json(value: Any) -> None:
    """One JSON document and a newline on stdout, written directly (no rich console wrapping)."""
    sys.stdout.write(logs.inert(dumps(value, ensure_ascii=False, default=str)) + "\n")
    sys.stdout.flush()
