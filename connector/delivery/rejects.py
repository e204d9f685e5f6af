"""The rejects feed (`[daemon] rejects_file`): each rejected record as one JSON line, for teams that
route rejects to a person (a log shipper tails the file, a script mails the new lines).

A line is written only after the chunk that rejected its record is committed to the ledger, so the
feed never names a reject the ledger lost; a crash between the commit and the write may leave that
chunk's lines out (`capture-sync runs show RUN --state rejected` lists every one). Contact data is
masked as `runs show` masks it (`A*** L***`, `a***@example.org`, `+1 *** *** **04`, and inside the
record id, the reason and every other field) unless `rejects_contact_data = true`. The file is
created 0600 and never opened through a symbolic link (a link planted in a shared folder would send
the contacts elsewhere); past `rejects_max_bytes` it is rotated: FILE.1 (newest) to FILE.3.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from ..contact_mask import mask_email, mask_name, mask_phone, mask_text
from ..ledger import Mapped

log = structlog.get_logger("capture_sync.delivery")

KEEP = 3  # rotated files kept: FILE.1 .. FILE.3
REJECTS_MAX_BYTES = 10_000_000
_MASKS = {
    "email": mask_email,
    "phone": mask_phone,
    "name": mask_name,
    "first_name": mask_name,
    "last_name": mask_name,
}


@dataclass(frozen=True)
class RejectsFeed:
    """Where the feed goes and how: `contact_data` writes names, emails and phones in full."""

    path: Path
    max_bytes: int = REJECTS_MAX_BYTES
    contact_data: bool = False

    def append(
        self,
        source: str,
        rejects: Sequence[tuple[str, Mapped]],
        run_id: int | None,
        columns: dict[str, tuple[str, ...]],
    ) -> None:
        """Append one line per (entry key, record), rotating first when the file would outgrow
        `max_bytes`. `columns` is the source's mapping (person field -> source fields): what tells a
        record's email, phone and name fields. A file that cannot be written is logged, never raised:
        the ledger holds every reject, and a sync must not stop for its copy."""
        if not rejects:
            return
        now = datetime.now(UTC).isoformat(timespec="seconds")
        masks = {} if self.contact_data else {c: _MASKS[t] for t, cs in columns.items() if t in _MASKS for c in cs}
        text = "".join(
            json.dumps(self._line(source, key, item, run_id, now, masks), ensure_ascii=False) + "\n"
            for key, item in rejects
        ).encode("utf-8")
        try:
            self._write(text)
        except OSError as exc:
            reason = "a symbolic link, not followed" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
            log.error(
                "rejects.unwritable",
                file=str(self.path),
                reason=reason,
                records=len(rejects),
                then="the ledger keeps them: `capture-sync runs show RUN --state rejected` lists them",
            )

    def _line(
        self, source: str, key: str, item: Mapped, run_id: int | None, now: str, masks: dict[str, Any]
    ) -> dict[str, Any]:
        reason = "; ".join(item.reasons)
        record_id = item.record_id
        data: dict[str, str] | None = item.raw
        if not self.contact_data:  # a record id may be the contact's email (primary_key = "Email") or phone
            reason, record_id = mask_text(reason), mask_text(record_id)
            data = None if data is None else {k: masks.get(k, mask_text)(v) for k, v in data.items()}
        return {
            "time": now,
            "run": run_id,
            "source": source,
            "record_id": record_id,
            "key": key,
            "reason": reason,
            "data": data,
        }

    def _write(self, text: bytes) -> None:
        try:
            size = os.lstat(self.path).st_size
        except FileNotFoundError:
            size = 0
        if size and size + len(text) > self.max_bytes:
            self._rotate()
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
