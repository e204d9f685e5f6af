"""When the synthetic test flow (`check --flow`) last passed, per base URL and client name (v3).
Nothing here commits: the Ledger method around each function is the transaction."""

from __future__ import annotations

import json
from typing import Any

from ._db import Db


def normal_url(base_url: str) -> str:
    """One spelling per server: `.../capture/` and `.../capture` are the same base URL."""
    return base_url.strip().rstrip("/")


def record_pass(db: Db, base_url: str, client_name: str, summary: dict[str, Any], now: float) -> None:
    db.execute(
        "INSERT INTO flows (base_url, client_name, passed_at, summary) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(base_url, client_name) DO UPDATE SET passed_at = excluded.passed_at, summary = excluded.summary",
        (normal_url(base_url), client_name, now, json.dumps(summary, sort_keys=True)),
    )


def passed_at(db: Db, base_url: str, client_name: str | None) -> float | None:
    """The last pass against `base_url` as `client_name`, or as any client when it is None."""
    sql, params = "SELECT MAX(passed_at) FROM flows WHERE base_url = ?", [normal_url(base_url)]
    if client_name is not None:
        sql, params = sql + " AND client_name = ?", [*params, client_name]
    row = db.execute(sql, params).fetchone()
    return None if row[0] is None else float(row[0])
