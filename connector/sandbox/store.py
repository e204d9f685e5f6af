"""The sandbox's SQLite storage: API clients, canonical persons, captures and idempotency records.

One connection guarded by a lock serves the server thread and test inspection alike; every write
is a `BEGIN IMMEDIATE` transaction, and WAL with a busy timeout lets another process (the
`sandbox create-client` command next to a running `sandbox serve`) write the same file safely.
A capture, the response it produced and the completion of its idempotency record commit together,
so a crash leaves either all of it or none. synchronous=NORMAL: a killed process loses nothing
committed; only a power cut could, which a sandbox accepts.

The sandbox is one company: every client captures into the same set of canonical persons. Each
capture keeps the fields it wrote (`captures.data`), so tests can tell which version landed last;
its `person_key` is the bulk person's idempotency_key, or, when the idempotency scope is shared
(behaviour.py), POST /person's Idempotency-Key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..api.models import PersonInput
from ..secret_files import create_private

Operation = Literal["person", "bulk"]
CaptureAction = Literal["created", "updated"]
DEFAULT_RATE_LIMIT = 600

_SCHEMA = """
CREATE TABLE IF NOT EXISTS clients (
    api_key TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    secret_salt BLOB NOT NULL,
    secret_hash BLOB NOT NULL,
    rate_limit INTEGER NOT NULL,
    default_lead_source TEXT,
    active INTEGER NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS persons (
    id TEXT PRIMARY KEY,
    identity TEXT NOT NULL UNIQUE,
    data TEXT NOT NULL,
    lead_source TEXT,
    created_by TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS captures (
    id INTEGER PRIMARY KEY,
    client TEXT NOT NULL,
    operation TEXT NOT NULL,
    request_key TEXT NOT NULL,
    person_key TEXT,
    person_id TEXT NOT NULL,
    identity TEXT NOT NULL,
    action TEXT NOT NULL,
    at REAL NOT NULL,
    data TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS captures_person_key ON captures (client, person_key)
    WHERE person_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS captures_identity ON captures (identity);
CREATE TABLE IF NOT EXISTS idempotency (
    client TEXT NOT NULL,
    operation TEXT NOT NULL,
    key TEXT NOT NULL,
    body_hash TEXT NOT NULL,
    state TEXT NOT NULL,
    status_code INTEGER,
    response TEXT,
    created_at REAL NOT NULL,
    PRIMARY KEY (client, operation, key)
);
"""

_NON_DIGITS = re.compile(r"\D")
_SPACES = re.compile(r"\s+")


class UnknownClient(KeyError):
    """No client has this API key."""


@dataclass(frozen=True, slots=True)
class Client:
    api_key: str
    name: str
    rate_limit: int
    default_lead_source: str | None
    active: bool


@dataclass(frozen=True, slots=True)
class Claim:
    """The idempotency record found or created for one request."""

    state: Literal["new", "replay", "conflict", "running"]
    status_code: int | None = None
    response: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Captured:
    person_id: str
    action: CaptureAction


def identity_of(person: PersonInput) -> str:
    """Email (case-insensitive) when given, else the phone's digits (its folded text if it has none)."""
    if person.email is not None:
        return "email:" + person.email.strip().lower()
    phone = person.phone or ""
    digits = _NON_DIGITS.sub("", phone)
    return "phone:" + digits if digits else "phone-text:" + _SPACES.sub(" ", phone.strip().lower())


def _hash_secret(salt: bytes, secret: str) -> bytes:
    return hashlib.scrypt(secret.encode("utf-8"), salt=salt, n=2**12, r=8, p=1, dklen=32)


class SandboxStore:
    """All state of one sandbox; safe to share between threads."""

    def __init__(self, db_path: str | Path, *, busy_timeout_s: float = 10.0) -> None:
        self.db_path = Path(db_path)
        if str(db_path) != ":memory:":
            create_private(self.db_path)  # it holds the clients' secret hashes and every captured person
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.db_path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        with self._lock:
            self._db.executescript(_SCHEMA)  # idempotent; executescript commits by itself
        self._add_capture_data()
        self._secret_cache: dict[str, bytes] = {}

    def _add_capture_data(self) -> None:
        """Databases made before captures kept their fields get the `data` column (NULL in old rows)."""
        with self._write() as db:
            columns = {row["name"] for row in db.execute("PRAGMA table_info(captures)")}
            if "data" not in columns:
                db.execute("ALTER TABLE captures ADD COLUMN data TEXT")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> SandboxStore:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    # -- clients -------------------------------------------------------------------------------

    def create_client(
        self,
        name: str,
        rate_limit: int = DEFAULT_RATE_LIMIT,
        default_lead_source: str | None = None,
        active: bool = True,
    ) -> tuple[str, str]:
        """A new client; returns (api_key, api_secret). Only a salted hash of the secret is kept."""
        if rate_limit < 1:
            raise ValueError("rate_limit must be at least 1")
        api_key = "ck_" + secrets.token_hex(16)
        secret = "cs_" + secrets.token_urlsafe(32)
        salt = secrets.token_bytes(16)
        with self._write() as db:
            db.execute(
                "INSERT INTO clients VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    api_key,
                    name,
                    salt,
                    _hash_secret(salt, secret),
                    rate_limit,
                    default_lead_source,
                    int(active),
                    time.time(),
                ),
            )
        return api_key, secret

    def regenerate_secret(self, api_key: str, secret: str | None = None) -> str:
        """A new secret for the client; the old one stops working at once. A test may choose the new
        secret, to put it in place on the integration's side before the server switches."""
        secret = secret or "cs_" + secrets.token_urlsafe(32)
        salt = secrets.token_bytes(16)
        with self._write() as db:
            cur = db.execute(
                "UPDATE clients SET secret_salt = ?, secret_hash = ? WHERE api_key = ?",
                (salt, _hash_secret(salt, secret), api_key),
            )
            if cur.rowcount == 0:
                raise UnknownClient(api_key)
        return secret

    def set_rate_limit(self, api_key: str, rate_limit: int) -> None:
        """Change the client's rate_limit; a running server applies it from the next request."""
        if rate_limit < 1:
            raise ValueError("rate_limit must be at least 1")
        with self._write() as db:
            cur = db.execute("UPDATE clients SET rate_limit = ? WHERE api_key = ?", (rate_limit, api_key))
            if cur.rowcount == 0:
                raise UnknownClient(api_key)

    def set_active(self, api_key: str, active: bool) -> None:
        with self._write() as db:
            cur = db.execute("UPDATE clients SET active = ? WHERE api_key = ?", (int(active), api_key))
            if cur.rowcount == 0:
                raise UnknownClient(api_key)

    def authenticate(self, api_key: str, api_secret: str) -> Client | None:
        """The active client these credentials prove, or None. Secrets are compared in constant time.

        Verified (key, salted hash) pairs are remembered so a busy client pays the hash once; the
        stored hash is re-read every time, so a regenerated secret fails immediately.
        """
        rows = self._read("SELECT * FROM clients WHERE api_key = ?", (api_key,))
        if not rows:
            return None
        row = rows[0]
        cache_id = hashlib.sha256(f"{api_key}\x00{api_secret}".encode()).hexdigest()  # no plain secret kept
        expected = row["secret_hash"]
        if not hmac.compare_digest(self._secret_cache.get(cache_id, b""), expected):
            if not hmac.compare_digest(_hash_secret(row["secret_salt"], api_secret), expected):
                return None
            self._secret_cache[cache_id] = expected
        if not row["active"]:
            return None
        return Client(row["api_key"], row["name"], row["rate_limit"], row["default_lead_source"], True)

    # -- idempotency ---------------------------------------------------------------------------

    def claim(self, client: str, operation: Operation, key: str, body_hash: str) -> Claim:
        """Start a request under `key`, or say why not: an earlier result, another body, or still running."""
        with self._write() as db:
            row = db.execute(
                "SELECT body_hash, state, status_code, response FROM idempotency "
                "WHERE client = ? AND operation = ? AND key = ?",
                (client, operation, key),
            ).fetchone()
            if row is None:
                db.execute(
                    "INSERT INTO idempotency VALUES (?, ?, ?, ?, 'running', NULL, NULL, ?)",
                    (client, operation, key, body_hash, time.time()),
                )
                return Claim("new")
        if row["body_hash"] != body_hash:
            return Claim("conflict")
        if row["state"] == "running":
            return Claim("running")
        return Claim("replay", row["status_code"], json.loads(row["response"]))

    def release(self, client: str, operation: Operation, key: str) -> None:
        """Forget a claim whose request ended without a result, so a retry can run it."""
        with self._write() as db:
            db.execute(
                "DELETE FROM idempotency WHERE client = ? AND operation = ? AND key = ? AND state = 'running'",
                (client, operation, key),
            )

    def release_all_running(self) -> int:
        """At start-up: claims left running by a dead process committed nothing, so drop them."""
        with self._write() as db:
            return db.execute("DELETE FROM idempotency WHERE state = 'running'").rowcount

    def idempotency_state(self, client: str, operation: Operation, key: str) -> str | None:
        rows = self._read(
            "SELECT state FROM idempotency WHERE client = ? AND operation = ? AND key = ?",
            (client, operation, key),
        )
        return rows[0]["state"] if rows else None

    # -- captures ------------------------------------------------------------------------------

    @contextmanager
    def capture_session(
        self, client: Client, operation: Operation, request_key: str, *, request_scoped: bool = False
    ) -> Iterator[CaptureSession]:
        """One transaction for a request's captures and its stored response (see `CaptureSession`)."""
        with self._write() as db:
            yield CaptureSession(db, client, operation, request_key, request_scoped=request_scoped)

    # -- inspection ----------------------------------------------------------------------------

    def persons(self) -> list[dict[str, Any]]:
        """The canonical persons, oldest first, each with its captured fields under `data`."""
        rows = self._read("SELECT * FROM persons ORDER BY created_at, id")
        return [{**dict(r), "data": json.loads(r["data"])} for r in rows]

    def captures(self) -> list[dict[str, Any]]:
        """Every capture that created or updated a person, in commit order, each with the fields it
        wrote under `data` (None for captures older than that column): the last one is what landed."""
        rows = self._read("SELECT * FROM captures ORDER BY id")
        return [{**dict(r), "data": None if r["data"] is None else json.loads(r["data"])} for r in rows]

    def capture_counts_by_person_key(self) -> dict[tuple[str, str], int]:
        """(client, per-person idempotency key) -> how many captures used it (at most 1 by design)."""
        rows = self._read(
            "SELECT client, person_key, COUNT(*) AS n FROM captures WHERE person_key IS NOT NULL "
            "GROUP BY client, person_key"
        )
        return {(r["client"], r["person_key"]): r["n"] for r in rows}

    def creations_by_identity(self) -> dict[str, int]:
        """identity -> how many captures *created* a person for it (exactly 1 when nothing is doubled)."""
        rows = self._read("SELECT identity, SUM(action = 'created') AS n FROM captures GROUP BY identity")
        return {r["identity"]: r["n"] for r in rows}


class CaptureSession:
    """Captures inside one open write transaction; `finish` stores the response for replays.
    `request_scoped` (Behaviour person_key_scope="request"): person keys count within this request only."""

    def __init__(
        self,
        db: sqlite3.Connection,
        client: Client,
        operation: Operation,
        request_key: str,
        *,
        request_scoped: bool = False,
    ) -> None:
        self._db = db
        self._client = client
        self._operation = operation
        self._request_key = request_key
        self._request_scoped = request_scoped

    def earlier_capture(self, person_key: str) -> Captured | None:
        """The earlier capture under this client's person key (in this request, when request-scoped), if any."""
        sql = "SELECT person_id, action FROM captures WHERE client = ? AND person_key = ?"
        params: tuple[str, ...] = (self._client.api_key, person_key)
        if self._request_scoped:
            sql += " AND operation = ? AND request_key = ?"
            params += (self._operation, self._request_key)
        row = self._db.execute(sql, params).fetchone()
        return Captured(row["person_id"], row["action"]) if row else None

    def capture(self, person: PersonInput, person_key: str | None = None) -> Captured:
        """Create the canonical person for this identity, or merge the given fields into it."""
        identity = identity_of(person)
        now = time.time()
        fields = person.model_dump(exclude_none=True, exclude={"idempotency_key"})
        row = self._db.execute("SELECT id, data FROM persons WHERE identity = ?", (identity,)).fetchone()
        action: CaptureAction
        if row is None:
            person_id, action = str(uuid.uuid4()), "created"
            self._db.execute(
                "INSERT INTO persons VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    person_id,
                    identity,
                    json.dumps(fields),
                    self._client.default_lead_source,
                    self._client.api_key,
                    now,
                    now,
                ),
            )
        else:
            person_id, action = row["id"], "updated"
            merged = {**json.loads(row["data"]), **fields}
            self._db.execute(
                "UPDATE persons SET data = ?, updated_at = ? WHERE id = ?",
                (json.dumps(merged), now, person_id),
            )
        if (
            person_key is not None
            and self._request_scoped
            and self._db.execute(
                "SELECT 1 FROM captures WHERE client = ? AND person_key = ?", (self._client.api_key, person_key)
            ).fetchone()
        ):
            person_key = None  # a key from an earlier request captured again: the index holds it once
        self._db.execute(
            "INSERT INTO captures "
            "(client, operation, request_key, person_key, person_id, identity, action, at, data) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self._client.api_key,
                self._operation,
                self._request_key,
                person_key,
                person_id,
                identity,
                action,
                now,
                json.dumps(fields),
            ),
        )
        return Captured(person_id, action)

    def finish(self, status_code: int, response: dict[str, Any]) -> None:
        self._db.execute(
            "UPDATE idempotency SET state = 'done', status_code = ?, response = ? "
            "WHERE client = ? AND operation = ? AND key = ?",
            (status_code, json.dumps(response), self._client.api_key, self._operation, self._request_key),
        )
