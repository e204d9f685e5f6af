"""The progress display: live counts on a terminal, nothing when the output is not one."""

from __future__ import annotations

import io

from rich.console import Console

from connector.progress import progress_for


def test_a_terminal_gets_live_counts_of_read_sent_settled() -> None:
    screen = io.StringIO()
    with progress_for(Console(file=screen, force_terminal=True, width=100)) as progress:
        assert progress is not None
        progress.advance("read", 250)
        progress.advance("sent", 100)
        progress.advance("settled", 90)
        counts = {task.description.strip(): task.completed for task in progress.display.tasks}
    assert counts == {"records read": 250, "persons sent": 100, "persons settled": 90}
    assert "records read" in screen.getvalue()


def test_a_pipe_gets_no_display() -> None:
    screen = io.StringIO()
    with progress_for(Console(file=screen, force_terminal=False)) as progress:
        assert progress is None
    assert screen.getvalue() == ""
