"""Every example of the mapping reference (docs/mapping.md) is run here, so the reference cannot drift
from the mapper: each row of its table (mapping, record, person sent), its hook module, and its
whole example table."""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from connector.mapping import Mapping, Rejection

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "mapping.md"


def page() -> str:
    """The whole page: the reference and its section on bad values."""
    return REFERENCE.read_text(encoding="utf-8")


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", page(), re.DOTALL)


def code(cell: str) -> str:
    """The text of a cell's code span (`x` or `` x `` when it holds a backtick)."""
    match = re.fullmatch(r"\s*(`+)\s?(.*?)\s?\1\s*", cell)
    assert match, f"not a code span: {cell!r}"
    return match.group(2)


def rows() -> list[tuple[str, dict[str, Any], str]]:
    """(mapping line, record, expected) of the examples table (the one headed `| mapping |`)."""
    found = []
    in_table = False
    for line in page().splitlines():
        if line.startswith("| mapping |"):
            in_table = True
            continue
        if in_table and line.startswith("|---"):
            continue
        if in_table and line.startswith("|"):
            mapping, record, expected = [c.strip() for c in line.strip().strip("|").split(" | ")][:3]
            found.append((code(mapping), json.loads(code(record)), expected))
        elif in_table:
            break
    return found


@pytest.fixture(autouse=True)
def hook_module(tmp_path, monkeypatch):
    """The reference's `my_hooks.py`, importable as the reference says (its folder on the import path)."""
    [module] = [b for b in blocks("python") if b.startswith("# my_hooks.py")]
    (tmp_path / "my_hooks.py").write_text(module, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("my_hooks", None)


def test_the_reference_has_an_example_for_every_transform_and_every_kind_of_rule():
    lines = "\n".join(mapping for mapping, _, _ in rows())
    for transform in ("strip", "lower", "upper", "e164", "first_name", "last_name"):
        assert f'"{transform}"' in lines, transform
    for needed in (
        'transform = ["',
        "my_hooks:",
        "template =",
        "constant =",
        "default =",
        "custom_fields.",
        'on_error = "drop"',
        "hook =",
    ):
        assert needed in lines, needed


EXAMPLES = rows()


@pytest.mark.parametrize(("mapping", "record", "expected"), EXAMPLES, ids=[m for m, _, _ in EXAMPLES])
def test_each_example_maps_as_the_reference_says(mapping, record, expected):
    table = tomllib.loads(mapping)
    if "hook" not in table:  # the API needs a name and an email or phone: the reference says these are filled
        if not {"name", "first_name"} & set(table):
            table["first_name"] = {"constant": "Filler"}
        if "email" not in table:
            table["email"] = {"constant": "filler@example.com"}
    person = Mapping.from_config(table, where="sources.x.mapping").map(record)
    if expected == "rejected":
        assert isinstance(person, Rejection), person
        return
    assert not isinstance(person, Rejection), person.reasons
    sent = person.model_dump(exclude_none=True)
    for key, value in json.loads(code(expected)).items():
        if value is None:
            assert key not in sent, key
        else:
            assert sent.get(key) == value, (key, sent)


def test_the_whole_example_table_compiles_and_maps_a_record():
    [example] = [b for b in blocks("toml") if b.startswith("[sources.mapping]")]
    table = tomllib.loads(example)["sources"]["mapping"]
    mapping = Mapping.from_config(table, where="sources.signups.mapping")
    person = mapping.map(
        {
            "First": "Ada",
            "Last": "Lovelace",
            "Email": " ADA@Example.COM ",
            "Phone": "(202) 555-0143",
            "Company": "",
            "Title": "analyst",
            "Plan": "pro",
        }
    )
    assert not isinstance(person, Rejection), person.reasons
    assert person.model_dump(exclude_none=True) == {
        "first_name": "Ada",
        "last_name": "Lovelace",
        "name": "Ada Lovelace",
        "email": "ada@example.com",
        "phone": "+12025550143",
        "company": "(none)",
        "job_title": "Analyst",
        "notes": "imported by capture-sync",
        "custom_fields": {"plan": "pro", "tier": 2},
    }


@pytest.mark.parametrize("blank", ["", "   ", "\u200b", "\ufeff\u00a0", None])
def test_a_default_applies_to_blank_and_invisible_text_with_or_without_a_transform(blank):
    for spec in (
        {"field": "Company", "default": "(none)"},
        {"field": "Company", "default": "(none)", "transform": "strip"},
    ):
        table = {"first_name": "First", "email": "Email", "company": spec}
        person = Mapping.from_config(table, where="m").map(
            {"First": "Ada", "Email": "ada@example.com", "Company": blank}
        )
        assert not isinstance(person, Rejection) and person.company == "(none)", spec
