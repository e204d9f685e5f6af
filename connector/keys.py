"""Idempotency keys (design 2).

Per-person keys are derived, never random: the same record with the same mapped content always gets
the same key, so a re-read after a crash cannot become new work. Only content counts: the mapping's
spelling is not part of a key, so a mapping edit that yields the same payload is no new work. They
are hashes, so no record id or contact data ever appears in a key (keys do appear in logs). Bulk
batch keys are random: a batch is a write-ahead fact of the ledger, and its key is stored with its
exact member list before use. A POST /person request is keyed by its person's key.
"""

from __future__ import annotations

import hashlib
import uuid

_sha256 = hashlib.sha256  # looked up once: both are called for every record a sync enqueues


def content_hash(payload_json: bytes) -> str:
    return _sha256(payload_json).hexdigest()


def person_key(source: str, record_id: str, content: str, revision: int) -> str:
    """Same source, record, content and revision -> same key; anything else -> new key. The material is
    the four joined by U+001F: a join, not an f-string, which would spell a str subclass's id by its own
    `__format__` (review R13; tests/mapping/test_fixed_outputs.py holds keys to fixed values)."""
    return "p-" + _sha256("\x1f".join((source, record_id, content, str(revision))).encode()).hexdigest()[:40]


def batch_key() -> str:
    return "b-" + uuid.uuid4().hex
