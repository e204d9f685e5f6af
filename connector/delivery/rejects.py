"""The rejects feed (`[daemon] rejects_file`): each rejected record as one JSON line, for teams that
route rejects to a person (a log shipper tails the file, a script mails the new lines).

The ledger is the feed's source: after each chunk that rejected something is committed, and once
when a pass starts, the feed appends the ledger's rejected entries newer than the last one it holds
(each line names its `entry` id and its `ledger`, and the newest entry written of each ledger is
also kept in a small position file beside the feed, `.FILE.position`, which survives the consumer
truncating the feed). Entry ids are a ledger's own: positions are kept per ledger (`Ledger.identity`),
so a ledger made afresh, or two integrations' processes sharing the file (they take turns by an
advisory lock on `.FILE.lock`), lose no line. So the feed
never names a reject the ledger lost, and a crash at any point (between the commit and the write, or
between the write and the position, or a write a full disk cut short) leaves every reject in the
feed exactly once after the next start; the lines are fsynced before the position names them. A
feed with neither lines nor a position file starts at the ledger's newest entry: turning the feed
on does not replay the ledger's history (`capture-sync runs show RUN --state rejected` lists it). Contact data is masked as `runs show` masks it (`A*** L***`, `a***@example.org`,
`+1 *** *** **04`, and inside the record id, the reason and every other field) unless
`rejects_contact_data = true`. The file is created 0600 and never opened through a symbolic link (a
link planted in a shared folder would send the contacts elsewhere); past `rejects_max_bytes` it is
rotated: FILE.1 (newest) to FILE.3.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from .. import failpoints, logs
from ..contact_mask import mask_email, mask_name, mask_phone, mask_text
from ..ledger import Ledger, RejectedEntry
from ._feed_locks import Busy as _Busy
from ._feed_locks import across_processes, in_process

log = logs.get_logger("capture_sync.delivery")

KEEP = 3  # rotated files kept: FILE.1 .. FILE.3
REJECTS_MAX_BYTES = 10_000_000
PAGE = 1000  # rejected entries read from the ledger and written at a time
TAIL_BYTES = 65536  # what is read from the feed's end to find its newest entry
# (feed file, ledger identity) -> the start point a commit took for a ledger the feed had not met while
# another process held the lock: the ledger's newest entry before that commit, kept by the next catch-up.
_PENDING_START: dict[tuple[str, str], int] = {}
_MASKS = {
    "email": mask_email,
    "phone": mask_phone,
    "name": mask_name,
    "first_name": mask_name,
    "last_name": mask_name,
}


@dataclass(frozen=True)
class RejectsFeed:
    """Where the feed goes and how: `contact_data` writes names, emails and phones in full. `columns`
    is each configured source's mapping (person field -> source fields), what tells a record's email,
    phone and name fields (a source it does not name has every field masked as a name)."""

    path: Path
    max_bytes: int = REJECTS_MAX_BYTES
    contact_data: bool = False
    columns: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)

    @property
    def position_file(self) -> Path:
        """The newest entry id written of each ledger the feed has met (`{"ledgers": {IDENTITY: ID}}`),
        beside the feed (hidden: a shipper's `FILE*` glob skips it)."""
        return self.path.with_name(f".{self.path.name}.position")

    @property
    def lock_file(self) -> Path:
        """What processes sharing the feed lock (`flock`) around reading and writing the position file
        and the lines: the position file itself is replaced, never written in place, so not it."""
        return self.path.with_name(f".{self.path.name}.lock")

    @contextlib.contextmanager
    def committing(self, ledger: Ledger) -> Iterator[None]:
        """Hold the feed (in this process) around a commit that may reject and the catch-up after it: a
        brand-new feed's start point is taken here, before the commit, so neither this commit's rejects
        nor those of another pass of this process (whose catch-up waits for this one) fall below it.
        The position file is read without the cross-process lock (it is replaced by a rename, so a read
        is whole, and a ledger once in it stays): only a ledger not in it yet takes the lock, so another
        integration's catch-up, or a process stopped holding the lock, holds no other commit."""
        with self._in_process():
            try:
                identity = ledger.identity()
                if identity not in self._positions()[0]:  # per chunk: the position file alone, no lock
                    newest = ledger.last_entry_id()
                    try:
                        with self._across_processes():
                            if identity not in self._positions()[0]:  # another process may have met it meanwhile
                                self._start(ledger, identity, newest)
                    except _Busy:  # kept here until a catch-up gets the lock: the start point is from before
                        _PENDING_START.setdefault((os.path.abspath(self.path), identity), newest)
            except OSError:
                pass  # the catch-up after the commit logs it
            yield

    def catch_up(self, ledger: Ledger) -> None:
        """Append a line for each rejected entry of `ledger` newer than the newest the feed holds,
        rotating first when the file would outgrow `max_bytes`. A file that cannot be written is
        logged, never raised: the ledger holds every reject, the next call writes what this one could
        not, and a sync must not stop for its copy. Nor does it wait long for another process holding
        the feed's lock (another integration's catch-up, a process stopped or hung): after `_feed_locks.LOCK_WAIT`
        it is logged (`rejects.busy`) and left to the next call, which tries without waiting until one
        gets the lock."""
        with self._in_process():  # two passes of one daemon at once would both write what neither had written
            try:
                self._catch_up(ledger)
            except _Busy:
                log.warning(
                    "rejects.busy",
                    file=str(self.path),
                    lock=str(self.lock_file),
                    then="another process holds the feed's lock: the next rejecting chunk or pass writes these",
                )
            except OSError as exc:
                reason = "a symbolic link, not followed" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
                log.error(
                    "rejects.unwritable",
                    file=str(self.path),
                    reason=reason,
                    then="the ledger keeps them: `capture-sync runs show RUN --state rejected` lists them",
                )

    def _in_process(self) -> threading.RLock:
        return in_process(self.path)

    def _across_processes(self) -> contextlib.AbstractContextManager[None]:
        return across_processes(self.path, self.lock_file)

    def _catch_up(self, ledger: Ledger) -> None:
        """The ledger is read without the cross-process lock (a PostgreSQL ledger's reads may wait for
        a connect timeout); under it, the position is read again (another process of this ledger, `sync`
        beside the daemon, may have written the page meanwhile) and only what is beyond it written."""
        identity = ledger.identity()
        newest = ledger.last_entry_id()
        with self._across_processes():
            after = self._start(ledger, identity, newest)
        while page := ledger.rejected_after(after, PAGE):
            with self._across_processes():
                held = self._start(ledger, identity, None)  # known now: no ledger read under the lock
                if lines := [self._line(entry, identity) for entry in page if entry.entry_id > held]:
                    failpoints.hit("before-rejects-write")
                    self._write(lines)
                    failpoints.hit("after-rejects-write")
                    self._keep_position(identity, page[-1].entry_id)
            after = max(held, page[-1].entry_id)

    def _start(self, ledger: Ledger, identity: str, newest: int | None) -> int:
        """Where this ledger's catch-up starts: the newest of its entries the feed holds. A ledger the
        feed has not met starts at its newest entry (turning the feed on does not replay the ledger's
        history), except a ledger met while it was empty by a release before schema v13 (identity "":
        a ledger had no stored id then), whose every entry came after: the first ledger the feed has not
        met takes that mark, and it goes. Since v13 every ledger has its id from creation.
        A position above the ledger's newest entry (`newest`, when given: a ledger put back from an
        older copy) is logged and dropped to it, so the ids the ledger gives again are written; the
        position file keeps the old position as the ledger's floor, so that the feed's lines from
        before the copy (read again once a rotation changed the feed) do not lift it back."""
        positions, mark, floors = self._positions()
        after = positions.get(identity, positions.get("?"))
        # The lines are read when the feed changed since the position was kept (a crash between a write
        # and its position); not otherwise, when the position may have been set below them (see below).
        held = self._last_entry(identity) if identity and mark != self._feed_mark() else None
        if held is not None and held > floors.get(identity, 0):  # the write got there and the position did not
            after = max(after or 0, held)
        if after is None and identity and "" in positions:
            after = 0  # met empty: its entries are all newer than the feed; the mark was for this ledger
            self._keep_position(identity, after, met_empty=True)
        if after is None:
            key = (os.path.abspath(self.path), identity)
            pending = _PENDING_START.get(key)  # a commit's, taken while the lock was busy
            after = pending if pending is not None else ledger.last_entry_id() if newest is None else newest
            if positions and after:  # a feed of other ledgers only (none: a new feed; 0: nothing missed)
                log.error(
                    "rejects.other_ledger",
                    file=str(self.path),
                    ledger=ledger.name,
                    then=f"this ledger's rejects are written from its entry {after} on; the older ones: "
                    "`capture-sync runs show RUN --state rejected`",
                )
            self._keep_position(identity, after)
            _PENDING_START.pop(key, None)  # kept: it goes (not before: a write that failed keeps it)
        elif newest is not None and after > newest and after > (newest := ledger.last_entry_id()):
            # `newest` was read before the lock: read again (rare: only when the position looks ahead), as
            # another process of this ledger (`sync` beside the daemon) may have written newer entries since
            log.error(
                "rejects.position_ahead",
                file=str(self.path),
                ledger=ledger.name,
                position=after,
                newest=newest,
                then=f"the ledger is older than the feed (put back from a copy?): its rejects are written "
                f"from its entry {newest} on; the feed's lines above it are from before",
            )
            self._keep_position(identity, newest, floor=max(after, floors.get(identity, 0)))
            after = newest
        return after

    def _positions(self) -> tuple[dict[str, int], list[int] | None, dict[str, int]]:
        """The position file: ledger identity -> the newest entry of it written, the feed's
        `_feed_mark` when it was kept, and ledger identity -> its floor: the newest of its entry ids the
        feed held when the ledger was found older than the feed (put back from a copy). The lines up to
        the floor may be from before the copy was put back, so they never move the position (a crash
        between a write and its position there costs those lines twice, not a skipped id); the floor
        goes once the position passes it. A bare number (a feed from before positions named their
        ledger) is taken as the position of the ledger that meets it (key "?")."""
        try:
            value = json.loads(self._read(self.position_file, 1 << 20))
        except (FileNotFoundError, ValueError):  # none, or not ours (a person wrote it): the lines tell
            return {}, None, {}
        if isinstance(value, int):
            return {"?": value}, None, {}
        ledgers = value.get("ledgers") if isinstance(value, dict) else None
        if not isinstance(ledgers, dict):
            return {}, None, {}
        floors = value.get("floors")
        return _ids(ledgers), value.get("feed"), _ids(floors) if isinstance(floors, dict) else {}

    def _feed_mark(self) -> list[int]:
        """The inode and size of the feed and of FILE.1 (0, 0 for a file not there): what tells whether
        the lines changed (were written, rotated) since the position was kept."""
        mark = []
        for path in (self.path, self.path.with_name(f"{self.path.name}.1")):
            try:
                held = os.lstat(path)
            except FileNotFoundError:
                mark += [0, 0]
            else:
                mark += [held.st_ino, held.st_size]
        return mark

    def _last_entry(self, identity: str) -> int | None:
        """The newest entry of the ledger `identity` in the feed's lines (or FILE.1's, when a crash came
        between a rotation and the write after it): the write got there, the position did not."""
        for path in (self.path, self.path.with_name(f"{self.path.name}.1")):
            try:
                tail = self._read(path, TAIL_BYTES)
            except FileNotFoundError:
                continue
            if not tail.endswith(b"\n"):  # a torn line, cut off before the next append: not written
                tail = tail[: tail.rfind(b"\n") + 1]
            for line in reversed(tail.splitlines()):
                try:
                    held = json.loads(line)
                    entry, of = held.get("entry"), held.get("ledger", identity)
                except (ValueError, AttributeError):
                    continue  # a line from before lines named their entry, or the torn head of the tail
                if isinstance(entry, int) and of == identity:
                    return entry
        return None

    @staticmethod
    def _read(path: Path, most: int) -> bytes:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            size = os.fstat(fd).st_size
            return os.pread(fd, most, max(0, size - most))
        finally:
            os.close(fd)

    def _keep_position(self, identity: str, entry_id: int, floor: int | None = None, met_empty: bool = False) -> None:
        """Write the position (and `floor`, when given) whole or not at all (a new file, on disk before
        it is renamed over the old one: after a power loss the position never names lines the disk
        lost). `met_empty`: this ledger is the one the feed met empty, so that mark (identity "") goes,
        and a ledger with history met later starts at its newest entry."""
        positions, _, floors = self._positions()
        positions.pop("?", None)  # a bare number from before: the ledger that met it owns it now
        if met_empty:
            positions.pop("", None)
        positions[identity] = entry_id
        if floor is not None:
            floors[identity] = floor
        if floors.get(identity, entry_id) <= entry_id:  # passed: the lines above it are this ledger's own
            floors.pop(identity, None)
        state = {"ledgers": positions, "feed": self._feed_mark()} | ({"floors": floors} if floors else {})
        temp = self.position_file.with_name(f"{self.position_file.name}.new")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            _write_all(fd, json.dumps(state).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, self.position_file)

    def _line(self, entry: RejectedEntry, identity: str) -> bytes:
        reason = entry.reason or ""
        record_id = entry.record_id
        data = entry.raw
        if not self.contact_data:  # a record id may be the contact's email (primary_key = "Email") or phone
            columns = self.columns.get(entry.source)
            # A source no longer configured (its rejects left out by a crash): any field may be a name.
            other = mask_text if columns is not None else mask_name
            masks = {c: _MASKS[t] for t, cs in (columns or {}).items() if t in _MASKS for c in cs}
            reason, record_id = mask_text(reason), mask_text(record_id)
            data = None if data is None else {k: masks.get(k, other)(v) for k, v in data.items()}
        line = {
            "time": datetime.fromtimestamp(entry.created_at, UTC).isoformat(timespec="seconds"),
            "run": entry.run_id,
            "source": entry.source,
            "entry": entry.entry_id,
            "ledger": identity,
            "record_id": record_id,
            "key": entry.key,
            "reason": reason,
            "data": data,
        }
        return (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")

    def _write(self, lines: list[bytes]) -> None:
        """Append `lines`, rotating before the line that would take the file past `max_bytes`."""
        try:
            size = os.lstat(self.path).st_size
        except FileNotFoundError:
            size = 0
        start = 0
        for n, line in enumerate(lines):
            if size and size + len(line) > self.max_bytes:
                self._append(b"".join(lines[start:n]))
                self._rotate()
                failpoints.hit("after-rejects-rotate")
                start, size = n, 0
            size += len(line)
        self._append(b"".join(lines[start:]))

    def _append(self, text: bytes) -> None:
        if not text:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)  # O_CREAT's mode applies to a new file only
            _cut_torn_line(fd)
            _write_all(fd, text)
            os.fsync(fd)  # once per page: on disk before the position names it
        finally:
            os.close(fd)

    def _rotate(self) -> None:
        """FILE.2 -> FILE.3, FILE.1 -> FILE.2, FILE -> FILE.1 (the oldest, FILE.3, goes)."""
        for n in range(KEEP - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{n}")
            if os.path.lexists(older):
                os.replace(older, self.path.with_name(f"{self.path.name}.{n + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))


def _write_all(fd: int, data: bytes) -> None:
    """`os.write` until all of `data` is written (a write may take only part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _ids(held: dict[object, object]) -> dict[str, int]:
    """The entries of a position file's map that are what they should be (ledger identity -> entry id)."""
    return {k: v for k, v in held.items() if isinstance(k, str) and isinstance(v, int)}


def _cut_torn_line(fd: int) -> None:
    """A write cut short (the disk full) left a line without its newline: cut it off, back to the last
    whole line, so that the next line is not glued to it (the position never named it: it is written
    again, whole)."""
    end = os.fstat(fd).st_size
    if not end or os.pread(fd, 1, end - 1) == b"\n":
        return
    start = end
    while start:
        start = max(0, start - TAIL_BYTES)
        newline = os.pread(fd, end - start, start).rfind(b"\n")
        if newline >= 0:
            os.ftruncate(fd, start + newline + 1)
            return
        end = start
    os.ftruncate(fd, 0)
