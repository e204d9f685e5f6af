"""The ledger holds every contact's payload: its files are readable by their owner only, whatever the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from connector.ledger import Ledger, Mapped


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


# 0o022 is the usual default, 0o000 the most permissive; 0o277 would even take the owner's write bit.
@pytest.mark.parametrize("umask", [0o022, 0o000, 0o277], indirect=True)
def test_a_new_ledger_and_its_wal_and_shm_are_readable_and_writable_by_their_owner_only(tmp_path, umask):
    path = tmp_path / "ledger.sqlite3"
    with Ledger(path) as ledger:
        ledger.enqueue("crm", "m1", [Mapped("1", payload='{"name":"Ada","email":"ada@example.org"}')], None)
        files = [path, *(path.with_name(path.name + suffix) for suffix in ("-wal", "-shm"))]
        assert {f.name: oct(mode(f)) for f in files} == {f.name: "0o600" for f in files}


@pytest.mark.parametrize("umask", [0o022, 0o000, 0o277], indirect=True)
def test_the_daemon_lock_is_readable_by_its_owner_only(tmp_path, umask):
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        ledger.acquire_daemon_lock()
        assert mode(tmp_path / "ledger.sqlite3.lock") == 0o600


@pytest.mark.parametrize("existing", [0o600, 0o640])
def test_an_existing_ledgers_mode_is_left_as_it_is(tmp_path, existing):
    """Never loosened, nor changed behind the user's back: `check` warns when others may read it."""
    path = tmp_path / "ledger.sqlite3"
    Ledger(path).close()
    path.chmod(existing)
    with Ledger(path) as ledger:
        ledger.enqueue("crm", "m1", [Mapped("1", payload='{"name":"Ada","email":"ada@example.org"}')], None)
        assert mode(path) == mode(path.with_name(path.name + "-wal")) == existing
