"""Source discovery: built-ins, entry points (a broken or clashing plugin must not break the rest)
and "package.module:Class", with config problems that name the key."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from connector import plugins
from connector.plugins import build_source, discover, load_source_type, source_types
from connector.problems import ConfigProblem
from sources.csv_files import CsvSource


def fake_entry_points(*eps: EntryPoint):
    return lambda group: [ep for ep in eps if ep.group == group]


@pytest.fixture
def odd_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        plugins,
        "entry_points",
        fake_entry_points(
            EntryPoint("broken", "no_such_package.mod:Thing", plugins.ENTRY_POINT_GROUP),
            EntryPoint("csv", "sources.jsonl_files:JsonlSource", plugins.ENTRY_POINT_GROUP),  # clashes with a built-in
            EntryPoint("plain", "sources.csv_files:CsvSource", "some.other.group"),
        ),
    )


def test_a_broken_plugin_is_listed_with_its_error_and_the_rest_still_load(odd_plugins: None) -> None:
    found = {t.name: t for t in discover()}
    assert found["broken"].cls is None and "No module named 'no_such_package'" in (found["broken"].error or "")
    assert found["csv"].cls is CsvSource  # the built-in keeps its name
    assert set(source_types()) == {"csv", "jsonl", "sql", "http"}
    with pytest.raises(ConfigProblem, match=r"source type 'broken' .* does not load"):
        load_source_type("broken")


def test_unknown_and_unusable_types_are_config_problems_naming_the_key() -> None:
    with pytest.raises(ConfigProblem) as info:
        build_source("signups", "cvs", {"path": "x.csv"})
    assert info.value.problems[0].startswith(
        "sources.signups.type: unknown source type 'cvs' (installed: csv, jsonl, sql, http"
    )
    with pytest.raises(
        ConfigProblem, match=r"sources.signups.type: cannot load source type 'json:loads': json:loads is not a subclass"
    ):
        build_source("signups", "json:loads", {})
    with pytest.raises(ConfigProblem, match=r"cannot load source type 'nope.mod:X': No module named 'nope'"):
        build_source("signups", "nope.mod:X", {})


def test_a_class_path_loads_like_a_type_name_and_options_problems_name_their_keys() -> None:
    assert load_source_type("sources.csv_files:CsvSource") is load_source_type("csv") is CsvSource
    with pytest.raises(ConfigProblem) as info:
        build_source("signups", "csv", {"path": 5, "delimiter": ";;", "colour": "red"})
    assert info.value.problems == [
        "sources.signups.path: Input should be a valid string",
        "sources.signups.delimiter: String should have at most 1 character",
        "sources.signups.colour: unknown option",
    ]
