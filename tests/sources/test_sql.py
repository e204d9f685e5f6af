"""The sql source: the plugin kit on SQLite and on a real PostgreSQL server, keyset pages of 2 rows
so that every page boundary (and rows sharing a cursor value across one) is exercised; then the kit
again on text cursors and keys under collations that order unlike Python (SQLite NOCASE, ICU)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from connector.plugins import build_source
from connector.source import BadRecord, SourceError
from connector.testing import SourceContract

T0 = datetime(2024, 1, 2, 10, 0, tzinfo=UTC)
ROWS = [
    # id, updated_at (three rows share T0, across a page boundary), email
    (1, datetime(2024, 1, 1, 9, 0, tzinfo=UTC), "ann@example.com"),
    (4, T0, "di@example.com"),
    (2, T0, "bo@example.com"),
    (3, T0, "cy@example.com"),
    (5, datetime(2024, 1, 3, 8, 0, tzinfo=UTC), "ed@example.com"),
]


def create_contacts(url: str, rows: list[tuple[int, datetime, str]], *, drop: bool = True) -> None:
    engine = sa.create_engine(url)
    meta = sa.MetaData()
    table = sa.Table(
        "contacts",
        meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("email", sa.String),
    )
    with engine.begin() as conn:
        if drop:
            meta.drop_all(conn)
            meta.create_all(conn)
        conn.execute(table.insert(), [{"id": i, "updated_at": u, "email": e} for i, u, e in rows])
    engine.dispose()


class SqlContract(SourceContract):
    source_type = "sql"
    url: str

    def add_records(self, options: dict[str, Any]) -> None:
        # A late row sharing the last cursor value with a LOWER id than those already read, and a later one.
        create_contacts(
            options["url"],
            [(0, ROWS[-1][1], "zoe@example.com"), (6, datetime(2024, 1, 4, tzinfo=UTC), "flo@example.com")],
            drop=False,
        )

    def invalid_options(self, options: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {**options, "table": "contacts", "query": "SELECT * FROM contacts"},  # both
            {**options, "url_env": "X"},  # both url and url_env
            {**options, "page_size": 0},
            {k: v for k, v in options.items() if k != "primary_key"},
            {k: v for k, v in options.items() if k != "cursor"} | {"lookback": "10m"},  # new rows only: no lookback
            {**options, "lookback": "a while"},
        ]

    def bad_options(self, options: dict[str, Any]) -> dict[str, Any] | None:
        """Rows 2 and 5 without a key: one among rows sharing its cursor value, one the last row."""
        if options.get("table") not in ("contacts", "public.contacts"):
            return None
        query = f"SELECT CASE WHEN id IN (2, 5) THEN NULL ELSE id END AS id, updated_at, email FROM {options['table']}"
        return {**{k: v for k, v in options.items() if k != "table"}, "query": query}

    def broken_options(self, options: dict[str, Any]) -> dict[str, Any]:
        key = "table" if "table" in options else "query"
        return {**options, key: "no_such_table" if key == "table" else "SELECT * FROM no_such_table"}


class TestSqliteTableByCursor(SqlContract):
    @pytest.fixture
    def source_options(self, tmp_path: Path) -> dict[str, Any]:
        url = f"sqlite:///{tmp_path / 'crm.db'}"
        create_contacts(url, ROWS)
        return {"url": url, "table": "contacts", "primary_key": "id", "cursor": "updated_at", "page_size": 2}


class TestSqliteQueryByPrimaryKey(SqlContract):
    @pytest.fixture
    def source_options(self, tmp_path: Path) -> dict[str, Any]:
        url = f"sqlite:///{tmp_path / 'crm.db'}"
        create_contacts(url, ROWS)
        return {
            "url": url,
            "query": "SELECT id, email FROM contacts WHERE email LIKE '%@example.com'",
            "primary_key": "id",
            "page_size": 2,
        }

    def add_records(self, options: dict[str, Any]) -> None:
        create_contacts(options["url"], [(7, T0, "gus@example.com")], drop=False)


class TestPostgresTableByCursor(SqlContract):
    @pytest.fixture
    def source_options(self, postgres_url: str) -> dict[str, Any]:
        create_contacts(postgres_url, ROWS)
        return {
            "url": postgres_url,
            "table": "public.contacts",
            "primary_key": "id",
            "cursor": "updated_at",
            "page_size": 2,
        }


# Handles and tags whose order under the collations below is not Python's: ann/a, Bo/B, cy/b, Di/C, ed/d.
PEOPLE = [("cy", "b"), ("Di", "C"), ("ann", "a"), ("ed", "d"), ("Bo", "B")]


def create_people(url: str, rows: list[tuple[str, str]], *, collation: str | None = None, drop: bool = True) -> None:
    """`people`: a text primary key and a text cursor, both in `collation` (kept from the first call)."""
    engine = sa.create_engine(url)
    meta = sa.MetaData()
    text = sa.String(collation=collation)
    table = sa.Table(
        "people",
        meta,
        sa.Column("handle", text, primary_key=True),
        sa.Column("tag", text),
        sa.Column("email", sa.String),
    )
    with engine.begin() as conn:
        if drop:
            meta.drop_all(conn)
            meta.create_all(conn)
        conn.execute(table.insert(), [{"handle": h, "tag": t, "email": f"{h.lower()}@example.com"} for h, t in rows])
    engine.dispose()


class CollatedContract(SqlContract):
    """The kit on a text cursor and a text key compared by the database's collation, not by Python's."""

    def add_records(self, options: dict[str, Any]) -> None:
        # A late row at the last value with a key Python sorts first, and one beyond; in Python's order both are below "d".
        create_people(options["url"], [("Al", "d"), ("fi", "E")], drop=False)

    def test_a_lookback_on_a_text_column_is_a_clear_error(self, source_options: dict[str, Any], records: list) -> None:
        source = self.build({**source_options, "lookback": 5})  # the column's type is only known once read
        with pytest.raises(SourceError, match="`lookback` is a number, which cannot move back 'tag' value 'd'"):
            list(source.read(records[-1].state))


class TestSqliteNocase(CollatedContract):
    @pytest.fixture
    def source_options(self, tmp_path: Path) -> dict[str, Any]:
        url = f"sqlite:///{tmp_path / 'crm.db'}"
        create_people(url, PEOPLE, collation="NOCASE")
        return {"url": url, "table": "people", "primary_key": "handle", "cursor": "tag", "page_size": 2}


class TestPostgresIcuCollation(CollatedContract):
    @pytest.fixture
    def source_options(self, postgres_url: str) -> dict[str, Any]:
        create_people(postgres_url, PEOPLE, collation="und-x-icu")
        return {"url": postgres_url, "table": "people", "primary_key": "handle", "cursor": "tag", "page_size": 2}


@pytest.mark.parametrize("collation", ["NOCASE", "und-x-icu"])
def test_rows_above_the_last_value_in_the_databases_order_are_all_read(
    collation: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = f"sqlite:///{tmp_path / 'crm.db'}" if collation == "NOCASE" else request.getfixturevalue("postgres_url")
    create_people(url, [("ann", "a"), ("bo", "b")], collation=collation)
    options = {"url": url, "table": "people", "primary_key": "handle", "cursor": "tag", "page_size": 2}
    first = list(build_source("crm", "sql", options).read(None))
    assert [r.id for r in first] == ["ann", "bo"]
    create_people(url, [("cy", "C"), ("di", "d")], drop=False)  # in Python's order "C" < "b": it used to be lost
    assert [r.id for r in build_source("crm", "sql", options).read(first[-1].state)] == ["bo", "cy", "di"]


def test_a_pass_reads_its_last_value_again_and_lookback_reaches_rows_committed_late(postgres_url: str) -> None:
    create_contacts(postgres_url, ROWS)
    options = {"url": postgres_url, "table": "contacts", "primary_key": "id", "cursor": "updated_at", "page_size": 2}
    end = list(build_source("crm", "sql", options).read(None))[-1].state
    late = ROWS[-1][1] - timedelta(minutes=5)  # committed after the pass, with an earlier timestamp
    create_contacts(postgres_url, [(7, late, "late@example.com")], drop=False)
    assert [r.id for r in build_source("crm", "sql", options).read(end)] == ["5"]
    assert [r.id for r in build_source("crm", "sql", {**options, "lookback": "10m"}).read(end)] == ["7", "5"]


def test_sqlite_datetimes_stored_as_text_look_back_as_text(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'crm.db'}"
    create_contacts(url, ROWS)
    options = {"url": url, "table": "contacts", "primary_key": "id", "cursor": "updated_at", "lookback": "1d"}
    end = list(build_source("crm", "sql", options).read(None))[-1].state
    assert [r.id for r in build_source("crm", "sql", options).read(end)] == ["2", "3", "4", "5"]


def test_states_saved_with_seen_ids_read_their_boundary_again_or_resume_their_pass(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'crm.db'}"
    create_contacts(url, ROWS)
    options = {"url": url, "table": "contacts", "primary_key": "id", "cursor": "updated_at", "page_size": 2}
    t0 = next(r for r in build_source("crm", "sql", options).read(None) if r.id == "2").data["updated_at"]
    source = build_source("crm", "sql", options)
    assert [r.id for r in source.read({"cursor": t0, "seen": ["2", "3", "4"]})] == ["2", "3", "4", "5"]
    cut = {"pass": None, "max": {"cursor": t0, "seen": [[["2", "3"]], []]}, "at": {"cursor": t0, "key": 3}}
    assert [r.id for r in source.read(cut)] == ["4", "5"]


def test_postgres_values_reach_the_mapper_as_plain_json(postgres_url: str) -> None:
    create_contacts(postgres_url, ROWS[:1])
    source = build_source(
        "crm", "sql", {"url": postgres_url, "table": "contacts", "primary_key": "id", "cursor": "updated_at"}
    )
    [record] = source.read(None)
    source.close()
    assert record.id == "1"
    assert record.data == {"id": 1, "updated_at": "2024-01-01T09:00:00+00:00", "email": "ann@example.com"}


def test_the_url_can_come_from_the_environment_and_its_absence_is_explained(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'crm.db'}"
    create_contacts(url, ROWS)
    options = {"url_env": "CRM_DB_URL", "table": "contacts", "primary_key": "id"}
    with pytest.raises(SourceError, match="environment variable CRM_DB_URL is not set"):
        build_source("crm", "sql", options).check()
    monkeypatch.setenv("CRM_DB_URL", url)
    assert [r.id for r in build_source("crm", "sql", options).read(None)] == ["1", "2", "3", "4", "5"]


def test_an_unreachable_server_is_a_clear_source_error() -> None:
    source = build_source(
        "crm", "sql", {"url": "postgresql+psycopg://u:hunter22@127.0.0.1:1/db", "table": "t", "primary_key": "id"}
    )
    with pytest.raises(SourceError, match="cannot connect to the database") as info:
        source.check()
    assert "hunter22" not in str(info.value)


def test_a_row_without_a_key_is_a_bad_record_at_its_place_and_the_rows_around_it_are_read(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'crm.db'}"
    create_contacts(url, ROWS)
    query = "SELECT CASE WHEN id = 3 THEN NULL ELSE id END AS id, updated_at, email FROM contacts"
    items = list(
        build_source("crm", "sql", {"url": url, "query": query, "primary_key": "id", "cursor": "updated_at"}).read(None)
    )
    assert [r.id for r in items] == ["1", f"updated_at={items[1].raw['updated_at']}", "2", "4", "5"]
    bad = items[1]
    assert isinstance(bad, BadRecord) and bad.reason == "no value in primary key 'id'"
    assert (
        bad.where == f"the query row with updated_at = {bad.raw['updated_at']}" and bad.raw["email"] == "cy@example.com"
    )


def test_columns_come_from_the_database_without_reading_rows(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'crm.db'}"
    create_contacts(url, ROWS)
    table = build_source("crm", "sql", {"url": url, "table": "contacts", "primary_key": "id"})
    assert table.columns() == ["id", "updated_at", "email"]
    query = build_source(
        "crm", "sql", {"url": url, "query": 'SELECT id, email AS "E-mail" FROM contacts', "primary_key": "id"}
    )
    assert query.columns() == ["id", "E-mail"]
    with pytest.raises(SourceError, match="cannot read no_such_table"):
        build_source("crm", "sql", {"url": url, "table": "no_such_table", "primary_key": "id"}).columns()


def test_a_relative_sqlite_file_is_relative_to_the_config_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "conf" / "data").mkdir(parents=True)
    create_contacts(f"sqlite:///{tmp_path / 'conf' / 'data' / 'crm.db'}", ROWS)
    monkeypatch.chdir(tmp_path)  # not the config's folder
    options = {"url": "sqlite:///data/crm.db", "table": "contacts", "primary_key": "id"}
    source = build_source("crm", "sql", options, config_dir=tmp_path / "conf")
    assert [r.id for r in source.read(None)] == ["1", "2", "3", "4", "5"]
    absolute = f"sqlite:///{tmp_path / 'conf' / 'data' / 'crm.db'}"
    assert (
        build_source("crm", "sql", {**options, "url": absolute}, config_dir=tmp_path / "elsewhere").options.url
        == absolute
    )
    memory = build_source("crm", "sql", {**options, "url": "sqlite://"}, config_dir=tmp_path / "conf")
    assert memory.options.url == "sqlite://"
