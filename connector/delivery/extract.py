"""Extract: source -> mapping -> ledger, one chunk and its cursor per transaction.

Runs on a thread of its own (never on the event loop): a chunk's commit is an fsync, and the
requests in flight must not wait for it. Between chunks it asks `between_chunks` whether to go on,
so a streaming sync can pause the reading while enough work is queued and end it on a stop.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .. import logs
from .._frozen import maker
from ..ledger import Ledger, Mapped
from ..problems import ConfigProblem
from ..source import BadRecord, Item, Passed, Record, SourceError
from ._boundary import Checker, Slip, kept_key, position, shown_text
from .job import SourceJob
from .preflight import preflight
from .rejects import RejectsFeed
from .report import RunReport

if TYPE_CHECKING:
    from ..mapping import Mapping, Rejection

LOGGER = "capture_sync.delivery"
log = logs.get_logger(LOGGER)

RAW_VALUE_LIMIT = 500
# Records in a read's first enqueue transaction; each next one is twice the last, up to `chunk_size`:
# the first request goes after a quarter of the reading and mapping a full chunk takes. A larger
# `chunk_size` shares more index leaves per transaction (fewer WAL frames), yet 8,000 did not pay
# at 100,000 records and cost 13 MB (docs/performance.md, "Ledger writes, seventh session").
FIRST_CHUNK = 250


class Progress(Protocol):
    def advance(self, what: Literal["read", "sent", "settled"], n: int) -> None: ...


class NoProgress:
    def advance(self, what: str, n: int) -> None:
        pass


# Mapped(record_id, payload, raw, reasons, order, raw_digest) without its frozen __init__: one per record
_new_mapped: Callable[..., Mapped] = maker(Mapped)


def to_mapped(mapping: Mapping, record: Record, raw_digest: str | None = None) -> Mapped:
    result, notes = mapping.encoded_noting(record.data)
    if isinstance(result, bytes):
        return _new_mapped(record.id, result.decode("utf-8"), None, notes, record.order, raw_digest)
    return _refused(record, result, raw_digest)


def _refused(record: Record, result: Rejection, raw_digest: str | None) -> Mapped:
    """`to_mapped` of a record the mapping rejected."""
    return Mapped(
        record.id,
        raw=_shown_record(record.data),
        reasons=tuple(result.reasons),
        order=record.order,
        raw_digest=raw_digest,
    )


def raw_digests(mapping_version: str, items: Sequence[Record | BadRecord]) -> list[str | None]:
    """What each record was mapped from, as a digest (None for a BadRecord): the mapping's version,
    its place in the source's order and its fields. Equal to the digest the ledger holds for the
    record's newest version, the record is unchanged, and mapping it again is skipped (a lookback, a
    full refresh, a snapshot pass). `repr` rather than JSON: a third of the cost, and as exact for the
    plain values sources give (a value whose repr differs from pass to pass, a set, only ever takes
    the full path). None for fields that have no repr (an int beyond the interpreter's digit limit):
    the full path too. A chunk at a time, the version's text made once: the digests are fixed for
    good (tests/delivery/test_raw_digest.py holds them to the first spelling's).

    The records of a chunk nearly always share their field names, in one order (a file's header): the
    text is then one `%` of a template made once for those names (`_Spelling`), the values' reprs
    only, where a dict's repr spells every key again and guards against recursion. The hash
    starts from a copy of one made with its digest size, which spares parsing that keyword per record."""
    spelling = _Spelling(mapping_version)
    start = hashlib.blake2b(digest_size=16)
    digests: list[str | None] = []
    for item in items:
        if type(item) is not Record and not isinstance(item, Record):
            digests.append(None)
            continue
        data = item.data
        try:
            if (  # without a call; the keys' types first: an equal key of a str subclass has its own repr
                type(data) is dict
                and spelling.keys is not None
                and tuple(map(type, data)) == spelling.types
                and tuple(data) == spelling.keys
            ):
                text = spelling.template % (item.order, *data.values())
            else:
                text = spelling.text(item.order, data)
        except ValueError:
            digests.append(None)
            continue
        hasher = start.copy()
        hasher.update(text.encode("utf-8", "surrogatepass"))
        digests.append(hasher.hexdigest())
    return digests


class _Spelling:
    """A raw digest's text, `f"{version}\x1f{order!r}\x1f{data!r}"`, for the records of one chunk.
    A plain dict whose keys are the template's, as text and in its order, is spelled by the template
    (`repr` of each value, as the dict's repr writes it; a dict that holds itself, which no source
    reads, spells its inner self once more, and is mapped again once); any other takes the f-string.
    Keys of type `str` only, for the template and the records it spells: an equal key of another type
    (1 and True, a str subclass with its own repr) would have another repr (review R13). A record with
    other keys makes the template anew (a file with another header), until `_MISSES` records of the
    chunk did (keys that vary from record to record): its other records then take the f-string."""

    __slots__ = ("head", "keys", "misses", "template", "types")

    def __init__(self, mapping_version: str) -> None:
        self.head = f"{mapping_version}\x1f"
        self.keys: tuple[str, ...] | None = None  # the template's; None without one
        self.types: tuple[type, ...] = ()  # (str, ...) as long as `keys`: a key equal to one of them yet of
        # another type (numpy.str_, an object whose == raises on text) is spelled by its own repr
        self.template = ""
        self.misses = 0  # records whose keys were not the template's

    def text(self, order: Any, data: Any) -> str:
        """The text of a record that is not the template's (`raw_digests` spells those itself): a dict
        with text keys makes the template anew, from its keys."""
        self.keys = None
        if type(data) is dict and self.misses < _MISSES:
            self.misses += 1
            keys = tuple(data)
            if self.misses < _MISSES and all(type(key) is str for key in keys):
                self.keys, self.types = keys, (str,) * len(keys)
                fields = ", ".join(repr(key).replace("%", "%%") + ": %r" for key in keys)
                self.template = self.head.replace("%", "%%") + "%r\x1f{" + fields + "}"
                return self.template % (order, *data.values())
        return f"{self.head}{order!r}\x1f{data!r}"


_MISSES = 16  # records of a chunk whose keys were not the template's before it stops trying


def _shown_record(data: dict[str, Any]) -> dict[str, str]:
    return {_shown(k): _shown(v) for k, v in data.items()}


def _shown(value: object) -> str:
    """The rejected value as kept in the ledger for a person to read; never an exception. A lone
    surrogate, which UTF-8 cannot encode (nor the ledger store), is kept as its escape `\\ud800`."""
    try:
        text = str(value)[:RAW_VALUE_LIMIT]
    except ValueError:  # an int beyond the interpreter's digit limit
        return f"<{type(value).__name__} too large to show>"
    return text if text.isascii() else text.encode("utf-8", "backslashreplace").decode("utf-8")


def record_id(item: Record | BadRecord) -> str:
    """The id its entry is kept under: without an id, a bad record's position names it, so the same
    bad line read again is the same entry."""
    return item.id if isinstance(item, Record) else item.id or kept_key(f"@{shown_text(item.where)}")


def entry(mapping: Mapping, item: Record | BadRecord, report: RunReport, raw: str | None = None) -> Mapped:
    """A record as the ledger keeps it; a rejection's reasons are counted for the summary (a bad
    record's without its position, so that alike ones add up)."""
    if isinstance(item, BadRecord):
        report.rejection_reasons[shown_text(item.reason)] += 1
        shown = None if item.raw is None else _shown_record(item.raw)
        return Mapped(record_id(item), raw=shown, reasons=(shown_text(f"{item.where}: {item.reason}"),))
    mapped = to_mapped(mapping, item, raw)
    return mapped if mapped.payload is not None else _rejection(item, mapped, report)


def _rejection(record: Record, mapped: Mapped, report: RunReport) -> Mapped:
    """A record the mapping rejected, its reasons counted and each prefixed with where it is."""
    report.rejection_reasons.update(mapped.reasons)
    if record.where:
        where = shown_text(record.where)
        return replace(mapped, reasons=tuple(f"{where}: {reason}" for reason in mapped.reasons))
    return mapped


def read_source(ledger: Ledger, job: SourceJob, report: RunReport) -> Iterator[Item]:
    """The source's records from its committed cursor until it ends, raises or yields something it
    must not (`_boundary`). Either ends only this source's read: it is reported in one line, and
    what came before is kept (design 2: a bad record is a rejection; a source that breaks mid-read
    must not cost the records it already gave)."""
    count = items = 0
    # a snapshot read never resumes from a state and stores none; a source that spells its own states needs no walk
    checker = Checker(states=not job.snapshot and not job.source._spells_its_states())
    try:
        for item in job.source.read(None if job.from_start or job.snapshot else ledger.source_state(job.name)):
            items += 1
            try:
                item = checker.check(item)
            except Slip as slip:
                _failed(job, report, count, f"{position(items, item)}: {slip}", exc_info=False)
                return
            count += not isinstance(item, Passed)
            yield item
    except Exception as exc:  # a plugin may raise anything; KeyboardInterrupt and stops are not this
        detail = str(exc) if isinstance(exc, SourceError) else f"{type(exc).__name__}: {exc}"
        _failed(job, report, count, detail, exc_info=True)


def _failed(job: SourceJob, report: RunReport, count: int, detail: str, *, exc_info: bool) -> None:
    message = f"sources.{job.name}: the read failed after {count} record(s): {detail}"
    report.source_failures[job.name] = message
    traceback = exc_info and logging.getLogger(LOGGER).isEnabledFor(logging.DEBUG)  # -v: a plugin author wants it
    log.error("source.failed", source=job.name, records=count, error=detail, exc_info=traceback)


def readable(jobs: Sequence[SourceJob], report: RunReport) -> list[SourceJob]:
    """Check the setup before anything is read or sent: a config problem stops the run (all of
    them reported at once); a source that cannot be read now is skipped and reported, the others go on."""

    found = preflight(jobs)
    if found.config_problems:
        raise ConfigProblem(found.config_problems)
    for name, reason in found.unavailable.items():
        report.unavailable[name] = reason
        log.error("source.unavailable", source=name, reason=reason)
    return [job for job in jobs if job.name not in found.unavailable]


def extract(
    ledger: Ledger,
    job: SourceJob,
    chunk_size: int,
    report: RunReport,
    progress: Progress,
    between_chunks: Callable[[], bool] | None = None,
    rejects: RejectsFeed | None = None,
) -> bool:
    """Read the source from its committed cursor; each chunk and its cursor commit together, so a
    stop between chunks (or a crash anywhere) resumes exactly after the last committed chunk. The
    chunks grow from `FIRST_CHUNK` records, doubling up to `chunk_size`: a crash re-reads at most one. A bad
    record is a rejected entry and the cursor moves past it; a source that raises keeps the
    records before it, its cursor at the last of them. After each chunk `between_chunks()` may hold
    the reading back (a streaming sync waits there while enough work is queued); False ends it
    early. `rejects` catches up with the ledger after each chunk that rejected something is committed. Returns whether
    the source was read to its end."""
    chunk: list[Record | BadRecord] = []
    last_state: Any = None
    report.sources_read.append(job.name)
    if job.from_start:  # the cursor it replaces stays in the state history, to be put back if wanted
        ledger.change_source_state(job.name, None, "full-refresh")
    snapshot = _snapshot_state(job)
    started_at = ledger.source_state(job.name)  # an idle poll ends where it started: nothing to commit
    if snapshot is not None and started_at == snapshot:
        log.debug("source.snapshot_unchanged", source=job.name)  # nothing to read: the last pass read this very data
        return True

    held = False  # the cursor read past chunks that changed nothing, not committed yet

    def flush(final: bool) -> None:
        """Enqueue the chunk with its cursor. A chunk of unchanged records writes nothing (no commit,
        no fsync): its cursor waits for the next chunk that changes something, or the read's end. A
        crash in between reads those unchanged records again, which costs no more than this read did."""
        nonlocal held
        held = held or (bool(chunk) and not job.snapshot)  # cleared below once committed
        mapped, skipped = _changed(ledger, job, chunk, report)
        report.unchanged += skipped
        progress.advance("read", len(chunk))
        chunk.clear()
        if not mapped and not (final and held and last_state != started_at):
            return
        # the feed held from before the commit (a new feed's start point below it) to the catch-up after it
        with rejects.committing(ledger) if rejects is not None else contextlib.nullcontext():
            counts = ledger.enqueue(job.name, job.mapping.version, mapped, last_state)
            if (
                rejects is not None and counts.rejected
            ):  # after the commit: the feed never names a reject the ledger lost
                rejects.catch_up(ledger)
        held = False
        report.enqueued += counts.enqueued
        report.unchanged += counts.unchanged
        report.older += counts.older
        report.rejected += counts.rejected

    late = _LateRows(ledger, job, chunk_size)
    size = min(FIRST_CHUNK, chunk_size)
    for item in read_source(ledger, job, report):
        if isinstance(item, Passed):
            late.add(item)
            continue
        chunk.append(item)
        last_state = None if job.snapshot else item.state  # a snapshot reads everything every pass: no cursor
        report.read += 1
        if len(chunk) >= size:
            flush(final=False)
            size = min(2 * size, chunk_size)
            if between_chunks is not None and not between_chunks():
                flush(final=True)
                report.late += late.count()
                return False
    report.late += late.count()
    tail = bool(chunk)
    if snapshot is not None and job.name not in report.source_failures:
        last_state, held = snapshot, True  # read whole: the next pass may skip the same data
    flush(final=True)
    if tail and between_chunks is not None:
        between_chunks()  # tells the delivery that the last chunk is in
    return True


class _LateRows:
    """The rows an incremental read passed over below its cursor (`Passed`), counted against the
    ledger a chunk at a time: the ones whose id it never saw are late rows, lost to this cursor
    unless a person acts. Said once per read, with the remedy."""

    def __init__(self, ledger: Ledger, job: SourceJob, chunk_size: int) -> None:
        self.ledger, self.job, self.chunk_size = ledger, job, chunk_size
        self.waiting: dict[str, str | None] = {}  # id -> where, not yet looked up
        self.late = 0
        self.first: str | None = None

    def add(self, item: Passed) -> None:
        self.waiting.setdefault(item.id, item.where)
        if len(self.waiting) >= self.chunk_size:
            self._look_up()

    def _look_up(self) -> None:
        unseen = self.ledger.unseen_records(self.job.name, list(self.waiting))
        if unseen and self.first is None:
            self.first = self.waiting[unseen[0]] or f"id {unseen[0]!r}"
        self.late += len(unseen)
        self.waiting.clear()

    def count(self) -> int:
        """The late rows of the read so far, warned about once; the count is then reset."""
        if self.waiting:
            self._look_up()
        late, self.late = self.late, 0
        if late:
            log.warning(
                "source.late_rows",
                source=self.job.name,
                count=late,
                first=self.first,
                reason="rows whose cursor value is below where the pass starts, never seen by the ledger: not read",
                fix=f'set `lookback` on sources.{self.job.name} to cover how late rows arrive, or `mode = "snapshot"` '
                f"for a source without change tracking; `capture-sync sync --full-refresh --source {self.job.name}` reads them now",
            )
        return late


def _snapshot_state(job: SourceJob) -> dict[str, str] | None:
    """In snapshot mode, the state a complete pass leaves: the source's fingerprint of its data and
    the mapping's version, taken before reading (a change during the read makes the next pass read)."""
    if not job.snapshot or job.from_start:
        return None
    fingerprint = job.source.fingerprint()
    return None if fingerprint is None else {"snapshot": fingerprint, "mapping": job.mapping.version}


def _changed(
    ledger: Ledger, job: SourceJob, chunk: Sequence[Record | BadRecord], report: RunReport
) -> tuple[list[Mapped], int]:
    """The chunk's items mapped, except the records read again as they were last mapped (by their
    raw digest): those are counted, never mapped. A record that already came earlier in the chunk
    always takes the full path, as the ledger's newest version of it is then that earlier one."""
    mapping = job.mapping
    encoded = mapping.encoded_noting
    raws = raw_digests(mapping.version, chunk)
    ids = [item.id if type(item) is Record else record_id(item) for item in chunk]  # a call per record saved
    wanted = list(dict.fromkeys(rid for rid, raw in zip(ids, raws, strict=True) if raw is not None))
    known = ledger.raw_digests(job.name, wanted) if wanted else {}
    mapped: list[Mapped] = []
    touched: set[str] = set()
    for item, rid, raw in zip(chunk, ids, raws, strict=True):
        if raw is not None and rid not in touched and known.get(rid) == raw:
            continue
        touched.add(rid)
        # `entry`'s path for a record, without its calls (`to_mapped`'s steps inline): nearly every item
        if type(item) is Record:
            result, notes = encoded(item.data)
            if isinstance(result, bytes):
                mapped.append(_new_mapped(item.id, result.decode("utf-8"), None, notes, item.order, raw))
            else:
                mapped.append(_rejection(item, _refused(item, result, raw), report))
        else:
            mapped.append(entry(mapping, item, report, raw))
    return mapped, len(chunk) - len(mapped)
