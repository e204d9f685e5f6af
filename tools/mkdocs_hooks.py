"""mkdocs hooks (mkdocs.yml `hooks:`). A pipe inside a code span of a table cell is written `\\|` in
docs/*.md, so that GitHub, which also renders these pages, keeps the cell whole; Python-Markdown
keeps that backslash inside code, so the built site drops it from its table cells, and only there."""

from __future__ import annotations

import re
from typing import Any

_CELL = re.compile(r"<t([dh])\b[^>]*>.*?</t\1>", re.DOTALL)


def on_page_content(html: str, **_: Any) -> str:
    return _CELL.sub(lambda cell: cell.group(0).replace("\\|", "|"), html)
