"""Reading a ledger beside the process that writes it (the daemon's /metrics, /readyz and status
page): a connection of its own per read, in a worker thread, on either engine. The queries are
`views`' functions over the connection `read()` yields."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path

from . import _postgres, _sqlite
from ._db import Db, is_url

__all__ = ["Db", "SideReader"]


class SideReader:
    """Opens the ledger read-only for each read; call its methods in a worker thread."""

    def __init__(self, target: str | Path, password_file: Path | None = None, integration: str | None = None) -> None:
        self._pg = _postgres.PgTarget.parse(str(target), password_file, integration) if is_url(target) else None
        self._path = Path(target)

    def read(self) -> AbstractContextManager[Db]:
        """One read-only transaction."""
        return _sqlite.side_read(self._path) if self._pg is None else _postgres.side_read(self._pg)

    def writable(self) -> str | None:
        """None when the daemon can write the ledger; else why not."""
        return _sqlite.writable(self._path) if self._pg is None else _postgres.writable(self._pg)
