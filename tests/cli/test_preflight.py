"""preflight(jobs): every problem of every source at once, each a line a person can act on."""

from __future__ import annotations

from pathlib import Path

import pytest

from connector.delivery import SourceJob
from connector.delivery.preflight import close_match, preflight
from connector.mapping import Mapping
from connector.plugins import build_source

MAPPING = {"first_name": "First", "email": "Email", "custom_fields": {"plan": {"template": "{Plan} ({Tier})"}}}


def job(name: str, type_name: str, options: dict, folder: Path) -> SourceJob:
    mapping = Mapping.from_config(MAPPING, where=f"sources.{name}.mapping")
    return SourceJob(name, build_source(name, type_name, options, config_dir=folder), mapping)


def test_every_problem_of_every_source_is_found_at_once(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("id,first,E-mail,Plan\n1,Ada,ada@example.org,pro\n", encoding="utf-8")
    (tmp_path / "b.csv").write_text("id,First,Email,Plan,Tier\n1,Ada,ada@example.org,pro,2\n", encoding="utf-8")
    found = preflight(
        [
            job("a", "csv", {"path": "a.csv"}, tmp_path),
            job("b", "csv", {"path": "b.csv"}, tmp_path),
            job("c", "csv", {"path": "exports/*.csv"}, tmp_path),
        ]
    )
    assert found.config_problems == [
        "sources.a.mapping.first_name: the source has no column 'First'; did you mean 'first'?",
        "sources.a.mapping.email: the source has no column 'Email'; did you mean 'E-mail'?",
        "sources.a.mapping.custom_fields.plan: the source has no column 'Tier' (it has: 'id', 'first', 'E-mail', 'Plan')",
    ]
    assert found.unavailable == {"c": f"source 'c': no file matches '{tmp_path / 'exports' / '*.csv'}'"}


@pytest.mark.parametrize("password", ["pw", "a-much-longer-secret"])
def test_an_unreachable_database_names_source_and_url_but_never_the_password(tmp_path: Path, password: str) -> None:
    url = f"postgresql+psycopg://reader:{password}@127.0.0.1:1/crm"
    found = preflight([job("crm", "sql", {"url": url, "table": "people", "primary_key": "id"}, tmp_path)])
    reason = found.unavailable["crm"]
    assert reason.startswith("source 'crm': postgresql+psycopg://***:***@127.0.0.1:1/crm: cannot connect")
    assert password not in reason


def test_a_plugin_check_raising_anything_makes_only_that_source_unavailable(tmp_path: Path) -> None:
    broken = job("broken", "csv", {"path": "x.csv"}, tmp_path)
    broken.source.check = lambda: {}["token"]  # type: ignore[method-assign]
    (tmp_path / "ok.csv").write_text("First,Email,Plan,Tier\n", encoding="utf-8")
    found = preflight([broken, job("ok", "csv", {"path": "ok.csv"}, tmp_path)])
    assert found.unavailable == {"broken": f"source 'broken': {tmp_path / 'x.csv'}: KeyError: 'token'"}
    assert found.config_problems == []


def test_close_match_ignores_case_and_punctuation_differences() -> None:
    assert close_match("Email", ["id", "E-mail", "Name"]) == "E-mail"
    assert close_match("first_name", ["First Name", "Last Name"]) == "First Name"
    assert close_match("Phone", ["id", "Tel"]) is None
