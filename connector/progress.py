"""A rich progress display for `sync` and `replay` on a terminal; nothing extra when piped or logged."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TaskProgressColumn, TextColumn, TimeElapsedColumn

Stage = Literal["read", "sent", "settled"]
_LABELS: dict[Stage, str] = {"read": "records read", "sent": "persons sent", "settled": "persons settled"}


class TerminalProgress:
    """Implements the engine's Progress protocol; `advance` is safe from the extract thread."""

    def __init__(self, console: Console) -> None:
        self.display = Progress(
            SpinnerColumn(),
            TextColumn("{task.description:<16}"),
            TextColumn("{task.completed:>8.0f}"),
            TaskProgressColumn(show_speed=True),
            TimeElapsedColumn(),
            console=console,
        )
        self._tasks: dict[str, TaskID] = {
            stage: self.display.add_task(label, total=None) for stage, label in _LABELS.items()
        }

    def advance(self, what: Stage, n: int) -> None:
        self.display.advance(self._tasks[what], n)


@contextmanager
def progress_for(console: Console) -> Iterator[TerminalProgress | None]:
    """A live progress display on a terminal, None otherwise (the summary after the run says it all)."""
    if not console.is_terminal:
        yield None
        return
    progress = TerminalProgress(console)
    with progress.display:
        yield progress
