"""The rejects feed (`[daemon] rejects_file`): each rejected record as one JSON line, for teams that
route rejects to a person (a log shipper tails the file, a script mails the new lines).

The ledger is the feed's source: after each chunk that rejected something is committed, and once
when a pass starts, the feed appends the ledger's rejected entries newer than the last one it holds
(each line names its `entry` id, and the newest one written is also kept in a small position file
beside the feed, `.FILE.position`, which survives the consumer truncating the feed). So the feed
never names a reject the ledger lost, and a crash at any point (between the commit and the write, or
between the write and the position) leaves every reject in the feed exactly once after the next
start. A feed with neither lines nor a position file starts at the ledger's newest entry: turning
the feed on does not replay the ledger's history (`capture-sync runs show RUN --state rejected`
lists it). Contact data is masked as `runs show` masks it (`A*** L***`, `a***@example.org`,
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
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import structlog

from .. import failpoints
from ..contact_mask import mask_email, mask_name, mask_phone, mask_text
from ..ledger import Ledger, RejectedEntry

log = structlog.get_logger("capture_sync.delivery")

KEEP = 3  # rotated files kept: FILE.1 .. FILE.3
REJECTS_MAX_BYTES = 10_000_000
PAGE = 1000  # rejected entries read from the ledger and written at a time
TAIL_BYTES = 65536  # what is read from the feed's end to find its newest entry
_CATCHING_UP = threading.Lock()
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
        """The newest entry id written, beside the feed (hidden: a shipper's `FILE*` glob skips it)."""
        return self.path.with_name(f".{self.path.name}.position")

    def catch_up(self, ledger: Ledger) -> None:
        """Append a line for each rejected entry of `ledger` newer than the newest the feed holds,
        rotating first when the file would outgrow `max_bytes`. A file that cannot be written is
        logged, never raised: the ledger holds every reject, the next call writes what this one could
        not, and a sync must not stop for its copy."""
        with _CATCHING_UP:  # two passes of one daemon at once would both write what neither had written
            self._catch_up(ledger)

    def _catch_up(self, ledger: Ledger) -> None:
        try:
            after = self._written()
            if after is None:  # a new feed: from here on, not the ledger's history
                after = ledger.last_entry_id()
                self._keep_position(after)
            while page := ledger.rejected_after(after, PAGE):
                failpoints.hit("before-rejects-write")
                self._write([self._line(entry) for entry in page])
                failpoints.hit("after-rejects-write")
                after = page[-1].entry_id
                self._keep_position(after)
        except OSError as exc:
            reason = "a symbolic link, not followed" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
            log.error(
                "rejects.unwritable",
                file=str(self.path),
                reason=reason,
                then="the ledger keeps them: `capture-sync runs show RUN --state rejected` lists them",
            )

    def _written(self) -> int | None:
        """The newest entry id the feed holds: its position file, or the last line of the feed (or of
        FILE.1, when a crash came between a rotation and the write after it) when the write got there
        and the position did not; None for a feed never written."""
        try:
            position: int | None = int(self._read(self.position_file, 64))
        except FileNotFoundError:
            position = None
        except ValueError:  # not a number (the file is replaced whole, so a person wrote it): the lines tell
            position = None
        for path in (self.path, self.path.with_name(f"{self.path.name}.1")):
            last = self._last_entry(path)
            if last is not None:
                return max(last, position or 0)
        return position

    def _last_entry(self, path: Path) -> int | None:
        try:
            tail = self._read(path, TAIL_BYTES)
        except FileNotFoundError:
            return None
        for line in reversed(tail.splitlines()):
            try:
                entry = json.loads(line).get("entry")
            except (ValueError, AttributeError):
                continue  # a line from before lines named their entry, or the torn head of the tail
            if isinstance(entry, int):
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

    def _keep_position(self, entry_id: int) -> None:
        """Write the position whole or not at all (a new file renamed over the old one)."""
        temp = self.position_file.with_name(f"{self.position_file.name}.new")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, str(entry_id).encode())
        finally:
            os.close(fd)
        os.replace(temp, self.position_file)

    def _line(self, entry: RejectedEntry) -> bytes:
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
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)  # O_CREAT's mode applies to a new file only
            view = memoryview(text)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    def _rotate(self) -> None:
        """FILE.2 -> FILE.3, FILE.1 -> FILE.2, FILE -> FILE.1 (the oldest, FILE.3, goes)."""
        for n in range(KEEP - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{n}")
            if os.path.lexists(older):
                os.replace(older, self.path.with_name(f"{self.path.name}.{n + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
