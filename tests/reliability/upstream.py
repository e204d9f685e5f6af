"""An upstream that keeps changing, and the oracle of "never lost, never doubled, never stale".

`Upstream` is a contacts CSV edited like a live export: rows change company, last name and notes
(never the email, so the CRM's canonical person stays the same), new rows arrive, and every
change bumps the row's `Seq`, the number cursor the source reads changed rows by. Every version
of a row has its own notes ("rev <seq>"), so the sandbox's captures tell versions apart by their
data alone. About 10% of the rows are invalid (no email nor phone, or a malformed email) and stay
so; their versions must end `rejected`.

`check_versions` compares the final CSV with what the sandbox holds (its persons and every
capture with the fields it wrote) and with the ledger.
"""

from __future__ import annotations

import csv
import json
import os
import random
import sqlite3
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

COLUMNS = ("id", "Seq", "First", "Last", "Email", "Phone", "Company", "Notes")
CONTACT_MAPPING = {"first_name": "First", "last_name": "Last", "email": "Email", "phone": "Phone"}
MAPPING = {**CONTACT_MAPPING, "company": "Company", "notes": "Notes"}
CURSOR = "Seq"
COMPANIES = ("Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark", "Wayne")
# The ledger's states of an entry at the end: the newest version of a record, and the older ones.
NEWEST = {"captured", "duplicate", "failed", "rejected"}
OLDER = NEWEST | {"superseded"}
REFUSED = "person_refused"  # the error code of a person the sandbox refuses (Faults.p_person_fail)


def contact(i: int, rng: random.Random) -> dict[str, str]:
    """Row `i` of a contacts file; about 10% invalid (no email nor phone, or a malformed email)."""
    kind = rng.random()
    if kind < 0.05:
        return {"id": str(i), "First": "Nomail", "Last": f"N{i}", "Email": "", "Phone": ""}
    if kind < 0.10:
        return {"id": str(i), "First": "Bad", "Last": f"B{i}", "Email": f"bad{i}-at-example.com", "Phone": ""}
    phone = f"+1202555{i % 10_000:04d}"
    return {"id": str(i), "First": "Valid", "Last": f"V{i}", "Email": f"valid{i}@example.com", "Phone": phone}


@dataclass
class Upstream:
    """The CSV at `path`; `written` counts the valid versions written, `edits` the rewrites."""

    path: Path
    rng: random.Random
    rows: dict[str, dict[str, str]] = field(default_factory=dict)
    seq: int = 0
    written: int = 0
    edits: int = 0

    @classmethod
    def create(cls, path: Path, records: int, rng: random.Random) -> Upstream:
        upstream = cls(path, rng)
        for _ in range(records):
            upstream._add()
        upstream._write()
        return upstream

    def edit(self, share: float = 0.03, focus: Sequence[str] = ()) -> None:
        """Change `share` of the rows (at least one), half of them from `focus` when it has enough,
        and add a third as many new ones, in one rewrite."""
        n = max(1, round(len(self.rows) * share))
        candidates = sorted(self.rows.keys() & set(focus))
        aimed = self.rng.sample(candidates, min(n // 2, len(candidates)))
        changed = aimed + self.rng.sample(sorted(self.rows.keys() - set(aimed)), n - len(aimed))
        for record_id in changed:
            row = self.rows[record_id]
            row["Company"] = self.rng.choice(COMPANIES)
            if self.rng.random() < 0.3:
                row["Last"] = f"{row['Last'].split('-')[0]}-{self.seq + 1}"
            self._touch(row)
        for _ in range(max(1, len(changed) // 3)):
            self._add()
        self.edits += 1
        self._write()

    def expected(self, record_id: str) -> dict[str, str] | None:
        """The person the newest version maps to; None for an invalid row."""
        row = self.rows[record_id]
        if row["First"] != "Valid":
            return None
        return {name: row[column] for name, column in MAPPING.items()}

    def _add(self) -> None:
        row = {**contact(len(self.rows), self.rng), "Company": self.rng.choice(COMPANIES)}
        self.rows[row["id"]] = row
        self._touch(row)

    def _touch(self, row: dict[str, str]) -> None:
        self.seq += 1
        row["Seq"], row["Notes"] = str(self.seq), f"rev {self.seq}"
        self.written += row["First"] == "Valid"

    def _write(self) -> None:
        """All at once (a rename), as an export lands: a run reads the old file or the new one."""
        part = self.path.with_name(self.path.name + ".part")
        with part.open("w", newline="", encoding="utf-8") as fh:
            out = csv.DictWriter(fh, COLUMNS)
            out.writeheader()
            out.writerows(self.rows.values())
        os.replace(part, self.path)


@dataclass(frozen=True)
class VersionFigures:
    """records: rows whose newest version is valid; versions: valid versions the ledger read (of
    `written` upstream); captured_once: records whose newest version the CRM captured exactly once;
    refused: newest versions the CRM refused (held `failed` with the reason); lost: newest versions
    neither captured nor refused; doubled: captures of a version beyond its first; stale: records
    whose newest version was captured but whose CRM data is another version's."""

    records: int
    versions: int
    written: int
    captured_once: int
    refused: int
    lost: int
    doubled: int
    stale: int

    def line(self) -> str:
        return (
            f"records {self.records}, versions {self.versions} (of {self.written} written), "
            f"captured once {self.captured_once}, refused {self.refused}, lost {self.lost}, "
            f"doubled {self.doubled}, stale {self.stale}"
        )


def _canonical(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True)


# A ledger the oracle reads: a SQLite file, or (a PostgreSQL URL, the integration's schema).
Ledger = Path | tuple[str, str]
ENTRIES = "SELECT record_id, state, payload, last_error, person_id FROM entries ORDER BY id"


def _entry_rows(ledger: Ledger) -> list[Any]:
    if isinstance(ledger, tuple):
        import psycopg
        from psycopg.rows import dict_row

        url, schema = ledger
        with psycopg.connect(url, autocommit=True, options=f'-c search_path="{schema}"', row_factory=dict_row) as conn:
            return conn.execute(ENTRIES).fetchall()
    db = sqlite3.connect(ledger)
    db.row_factory = sqlite3.Row
    try:
        return db.execute(ENTRIES).fetchall()
    finally:
        db.close()


def _entries(ledger: Ledger) -> dict[str, list[Any]]:
    """record id -> its entries (versions), oldest first; each reads like a dict."""
    out: dict[str, list[Any]] = defaultdict(list)
    for row in _entry_rows(ledger):
        out[row["record_id"]].append(row)
    return out


def version_figures(store: Any, upstream: Upstream, ledger: Ledger) -> VersionFigures:
    """The figures of the sandbox against the final CSV; the ledger only says which newest
    versions the CRM refused."""
    captures = store.captures()
    by_identity: dict[str, list[str]] = defaultdict(list)  # identity -> data of its captures, in order
    for capture in captures:
        by_identity[capture["identity"]].append(_canonical(capture["data"]))
    entries = _entries(ledger)
    persons = {p["identity"]: p["data"] for p in store.persons()}
    records = captured_once = refused = lost = stale = 0
    for record_id in upstream.rows:
        want = upstream.expected(record_id)
        if want is None:
            continue
        records += 1
        identity, newest = "email:" + want["email"].lower(), _canonical(want)
        landed = by_identity[identity]
        if newest in landed:
            captured_once += landed.count(newest) == 1
            stale += landed[-1] != newest or persons.get(identity) != want
        elif record_id in entries and _refused(entries[record_id][-1], newest):
            refused += 1
        else:
            lost += 1
    return VersionFigures(
        records=records,
        versions=sum(1 for versions in entries.values() for e in versions if e["state"] != "rejected"),
        written=upstream.written,
        captured_once=captured_once,
        refused=refused,
        lost=lost,
        doubled=sum(n - 1 for n in Counter((c["identity"], _canonical(c["data"])) for c in captures).values()),
        stale=stale,
    )


def _refused(entry: Any, newest: str) -> bool:
    return (
        entry["state"] == "failed"
        and _canonical(json.loads(entry["payload"])) == newest
        and REFUSED in (entry["last_error"] or "")
    )


def check_versions(store: Any, upstream: Upstream, ledger: Ledger) -> VersionFigures:
    """0 lost, 0 doubled, 0 stale, and a ledger that agrees: each record's newest entry is its
    newest upstream version (valid: captured, duplicate or refused; invalid: rejected with its
    reasons), older entries are final, and nothing is left pending, in flight, unknown or blocked."""
    result = version_figures(store, upstream, ledger)
    assert (result.lost, result.doubled, result.stale) == (0, 0, 0), result
    person_ids = {p["id"] for p in store.persons()}
    for record_id, versions in _entries(ledger).items():
        *older, newest = versions
        want = upstream.expected(record_id)
        states = [e["state"] for e in versions]
        assert newest["state"] in NEWEST and all(e["state"] in OLDER for e in older), (record_id, states)
        if want is None:
            assert newest["state"] == "rejected" and "email" in newest["last_error"], dict(newest)
            continue
        assert json.loads(newest["payload"]) == want, (record_id, newest["payload"], want)
        for entry in versions:
            if entry["state"] == "failed":
                assert REFUSED in entry["last_error"], dict(entry)
            if entry["state"] == "captured" and entry["person_id"]:
                assert entry["person_id"] in person_ids, dict(entry)
    assert set(_entries(ledger)) == set(upstream.rows)
    return result
