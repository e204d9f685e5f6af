"""The rejects feed's locks: per feed file among this process's threads, and across processes by an
`flock` of the feed's lock file, held a page at a time and waited for within a bound."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

LOCK_WAIT = 3.0  # seconds a catch-up waits for another process holding the feed's lock (it holds a page)
# Feed files whose lock a catch-up of this process gave up on: the next tries do not wait, until one gets it.
_BUSY: set[str] = set()
# Per feed file, in this process: held from a rejecting commit to its catch-up, and by each catch-up.
_CATCHING_UP: dict[str, threading.RLock] = {}
_CATCHING_UP_MADE = threading.Lock()


class Busy(Exception):
    """Another process held the feed's lock past the wait: the catch-up is left to the next call."""


def in_process(feed: Path) -> threading.RLock:
    """The feed's lock among the threads of this process (one per file: another feed's fsyncs do not
    hold this one's commits)."""
    key = os.path.abspath(feed)
    with _CATCHING_UP_MADE:
        return _CATCHING_UP.setdefault(key, threading.RLock())


@contextlib.contextmanager
def across_processes(feed: Path, lock_file: Path) -> Iterator[None]:
    """An exclusive `flock` of `lock_file` (released when its descriptor closes, by a crash too):
    two processes sharing the feed (two integrations, or `sync` beside the daemon) would each
    write its position over the other's, and then the lines again. Held for a page at a time, so
    the other's wait is one page's fsync; `LOCK_WAIT` bounds it against a holder that stopped
    (raising `Busy`), and after a timeout the next tries do not wait, until one gets it."""
    key = os.path.abspath(feed)
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        _lock_within(fd, 0.0 if key in _BUSY else LOCK_WAIT, key)
        yield
    finally:
        os.close(fd)


def _lock_within(fd: int, wait: float, key: str) -> None:
    """`flock` the descriptor within `wait` seconds, or raise `Busy` (and mark the feed busy)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() >= deadline:
                _BUSY.add(key)
                raise Busy from None
            time.sleep(0.01)  # flock has no timed wait: try again until the deadline
        else:
            _BUSY.discard(key)
            return
