"""The three ways a source lost or mangled records, through the real `capture-sync sync` (a process)
against the sandbox over 127.0.0.1, judged by what the sandbox holds:

- an edit that keeps the cursor value (the same second) after a sync is captured by the next one, csv and sql;
- a text cursor in a case-insensitive collation loses no row (SQLite NOCASE: `C` after `b`);
- a csv line cut at the end of the file (`bob@example.co`) is captured once complete, once, in full.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from ..cli.conftest import CliKit


def contacts_table(db: Path, cursor_column: str) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(
            f"CREATE TABLE contacts (id TEXT PRIMARY KEY, First TEXT, Last TEXT, Email TEXT, Phone TEXT, {cursor_column})"
        )


def add_contacts(db: Path, *rows: tuple[str, str, str, str]) -> None:
    """(id, first name, email, cursor value) rows."""
    with sqlite3.connect(db) as conn:
        conn.executemany("INSERT INTO contacts VALUES (?, ?, 'Lee', ?, '', ?)", rows)


def sql_config(kit: CliKit, folder: Path, sandbox: Any, db: Path, cursor: str) -> str:
    return sync_config(
        kit,
        folder,
        sandbox,
        {"type": "sql", "url": f"sqlite:///{db}", "table": "contacts", "primary_key": "id", "cursor": cursor},
    )


def sync_config(kit: CliKit, folder: Path, sandbox: Any, source: dict[str, Any]) -> str:
    """The CLI tests' config (credentials, sandbox URL, contact mapping) with `source` as the source's own options."""
    key, secret = sandbox.create_client(rate_limit=1000)
    kit.credentials(folder, key, secret)
    path = kit.config(folder, sandbox.base_url, folder / "unused.csv")
    options = "".join(f"{name} = {json.dumps(value)}\n" for name, value in source.items())
    text, replaced = re.subn(
        r'type = "csv"\n.*?\n\n(?=\[sources\.mapping\])', lambda _: options + "\n", path.read_text(), flags=re.S
    )
    assert replaced == 1, "the CLI tests' config changed shape"
    path.write_text(text)
    return str(path)


def sync(kit: CliKit, config: str) -> None:
    done = kit.run("sync", "-c", config)
    assert done.code == 0, done.stderr


def first_names(sandbox: Any) -> dict[str, str]:
    return {p["data"]["email"]: p["data"].get("first_name") for p in sandbox.store.persons()}


def captures(sandbox: Any) -> dict[str, int]:
    """Email -> how many captures created or updated that person: what the CRM was told, repeats included."""
    emails = {p["id"]: p["data"]["email"] for p in sandbox.store.persons()}
    return dict(Counter(emails[c["person_id"]] for c in sandbox.store.captures()))


def test_a_csv_edit_in_the_same_second_as_the_last_sync_is_captured_next_time(
    kit: CliKit, sandbox: Any, tmp_path: Path
) -> None:
    export = tmp_path / "contacts.csv"
    header = "id,First,Last,Email,Phone,Updated\n"
    export.write_text(
        header + "R1,Ann,Lee,ann@example.org,,2024-05-01T10:00:00\nR2,Bo,Lee,bo@example.org,,2024-05-01T10:00:07\n"
    )
    config = sync_config(
        kit,
        tmp_path,
        sandbox,
        {
            "type": "csv",
            "path": str(export),
            "primary_key": "id",
            "cursor": "Updated",
            "cursor_type": "datetime",
        },
    )
    sync(kit, config)
    assert first_names(sandbox) == {"ann@example.org": "Ann", "bo@example.org": "Bo"}

    export.write_text(
        header + "R1,Ann,Lee,ann@example.org,,2024-05-01T10:00:00\nR2,Bob,Lee,bo@example.org,,2024-05-01T10:00:07\n"
    )
    sync(kit, config)
    assert first_names(sandbox) == {"ann@example.org": "Ann", "bo@example.org": "Bob"}
    sync(kit, config)  # the boundary row is read again, and found unchanged: nothing is sent twice
    assert captures(sandbox) == {"ann@example.org": 1, "bo@example.org": 2}


def test_a_sql_edit_in_the_same_second_as_the_last_sync_is_captured_next_time(
    kit: CliKit, sandbox: Any, tmp_path: Path
) -> None:
    db = tmp_path / "crm.db"
    contacts_table(db, "updated_at TEXT")
    add_contacts(
        db,
        ("R1", "Ann", "ann@example.org", "2024-05-01 10:00:00"),
        ("R2", "Bo", "bo@example.org", "2024-05-01 10:00:07"),
    )
    config = sql_config(kit, tmp_path, sandbox, db, "updated_at")
    sync(kit, config)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE contacts SET First = 'Bob' WHERE id = 'R2'")  # updated_at unchanged: the same second
    sync(kit, config)
    assert first_names(sandbox) == {"ann@example.org": "Ann", "bo@example.org": "Bob"}
    assert captures(sandbox) == {"ann@example.org": 1, "bo@example.org": 2}


def test_a_case_insensitive_text_cursor_loses_no_row(kit: CliKit, sandbox: Any, tmp_path: Path) -> None:
    db = tmp_path / "crm.db"
    contacts_table(db, "batch TEXT COLLATE NOCASE")
    add_contacts(db, ("R1", "Ann", "ann@example.org", "a"), ("R2", "Bo", "bo@example.org", "b"))
    config = sql_config(kit, tmp_path, sandbox, db, "batch")
    sync(kit, config)
    add_contacts(
        db, ("R3", "Cy", "cy@example.org", "C"), ("R4", "Di", "di@example.org", "d")
    )  # "C" < "b" in Python only
    sync(kit, config)
    assert sorted(first_names(sandbox)) == ["ann@example.org", "bo@example.org", "cy@example.org", "di@example.org"]


def test_a_csv_line_cut_at_the_end_is_captured_once_complete_and_once(
    kit: CliKit, sandbox: Any, tmp_path: Path
) -> None:
    export = tmp_path / "contacts.csv"
    # Every column is there, the last one cut short: the writer has not finished the line.
    export.write_text("id,First,Last,Phone,Email\nR1,Ann,Lee,,ann@example.org\nR2,Bob,Builder,,bob@example.co")
    config = sync_config(kit, tmp_path, sandbox, {"type": "csv", "path": str(export), "primary_key": "id"})
    sync(kit, config)
    assert first_names(sandbox) == {"ann@example.org": "Ann"}

    with export.open("a") as fh:
        fh.write("m\n")
    sync(kit, config)
    sync(kit, config)
    assert first_names(sandbox) == {"ann@example.org": "Ann", "bob@example.com": "Bob"}
    assert captures(sandbox) == {"ann@example.org": 1, "bob@example.com": 1}
