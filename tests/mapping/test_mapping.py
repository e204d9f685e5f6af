"""The mapper: what each config form does to a record, and how problems are reported."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from connector.api.models import PersonInput
from connector.mapping import Mapping, Rejection
from connector.problems import ConfigProblem

WHERE = "sources.signups.mapping"
DESIGN_EXAMPLE = {  # design section 6, as tomllib reads it
    "first_name": "First",
    "name": {"template": "{First} {Last}"},
    "email": {"field": "Email", "transform": "lower"},
    "phone": {"field": "Phone", "transform": "e164", "region": "US"},
    "custom_fields": {"plan": "Plan"},
}


def mapping(table: dict) -> Mapping:
    return Mapping.from_config(table, where=WHERE)


def test_the_design_example_maps_a_signup() -> None:
    person = mapping(DESIGN_EXAMPLE).map(
        {"First": "Ann", "Last": "Lee", "Email": "Ann.Lee@Example.COM", "Phone": "(415) 555-0100", "Plan": "pro"}
    )
    assert person == PersonInput(
        first_name="Ann",
        name="Ann Lee",
        email="ann.lee@example.com",
        phone="+14155550100",
        custom_fields={"plan": "pro"},
    )


def test_empty_values_are_absent_and_a_template_with_no_values_is_absent() -> None:
    m = mapping({**DESIGN_EXAMPLE, "company": {"field": "Company", "transform": "strip"}})
    person = m.map(
        {"First": "Ann", "Last": "", "Email": "ann@example.com", "Phone": "  ", "Plan": None, "Company": "   "}
    )
    assert person == PersonInput(first_name="Ann", name="Ann", email="ann@example.com")
    assert isinstance(m.map({"Email": "ann@example.com"}), Rejection)


@pytest.mark.parametrize(
    ("full", "first", "last"),
    [("Ada King Lovelace", "Ada King", "Lovelace"), ("Lovelace, Ada", "Ada", "Lovelace"), ("  Cher ", "Cher", None)],
)
def test_a_full_name_splits_into_first_and_last(full: str, first: str, last: str | None) -> None:
    m = mapping(
        {
            "first_name": {"field": "Full", "transform": ["strip", "first_name"]},
            "last_name": {"field": "Full", "transform": "last_name"},
            "email": "Email",
        }
    )
    person = m.map({"Full": full, "Email": "a@example.com"})
    assert isinstance(person, PersonInput)
    assert (person.first_name, person.last_name) == (first, last)


def test_constants_defaults_and_spreadsheet_numbers() -> None:
    m = mapping(
        {
            "name": "Name",
            "phone": {"field": "Phone", "transform": "e164", "region": "GB"},
            "company": {"field": "Company", "default": "Unknown"},
            "custom_fields": {"source": {"constant": "webinar"}, "seats": "Seats", "consent": "Consent"},
        }
    )
    person = m.map({"Name": "Bo", "Phone": 2079460018.0, "Seats": 12, "Consent": True})
    assert person == PersonInput(
        name="Bo",
        phone="+442079460018",
        company="Unknown",
        custom_fields={"source": "webinar", "seats": 12, "consent": True},
    )


@pytest.mark.parametrize(
    "number", ["555-0100", "555 0199", "(000) 555-0100", "+1 555 0100", "+1 (123) 456-7890", "+44 20 7946 001"]
)
def test_e164_refuses_a_possible_but_invalid_number(number: str) -> None:
    person = {"First": "Ann", "Email": "ann@example.com", "Phone": number}
    assert mapping(DESIGN_EXAMPLE).map(person) == Rejection(
        ["phone (from `Phone`): is not a valid phone number for region US"]
    )
    dropping = mapping({**DESIGN_EXAMPLE, "phone": {**DESIGN_EXAMPLE["phone"], "on_error": "drop"}})
    assert dropping.map(person) == PersonInput(first_name="Ann", name="Ann", email="ann@example.com")


def test_a_rejection_lists_every_problem_with_the_field_it_came_from() -> None:
    result = mapping(DESIGN_EXAMPLE).map(
        {"First": ["Ann"], "Email": "not an email", "Phone": "12", "Plan": float("inf")}
    )
    assert isinstance(result, Rejection)
    text = "\n".join(result.reasons)
    assert "first_name (from `First`): is a list, not text" in text
    assert "phone (from `Phone`): is not a valid phone number for region US" in text
    assert "custom_fields.plan (from `Plan`): is not a finite number" in text
    assert "`email` is not a valid email address" in text and "(from `Email`)" in text
    assert all("not an email" not in r for r in result.reasons)  # reasons are aggregated and shown: no values


def test_a_value_that_fails_is_also_counted_against_the_api_rules() -> None:
    result = mapping(DESIGN_EXAMPLE).map({"First": ["Ann"], "Email": "ann@example.com"})
    assert result == Rejection(
        [
            "name (from the template): template field `First` is a list, not text",
            "first_name (from `First`): is a list, not text",
            "needs `name` or `first_name`",
        ]
    )


def test_hooks_for_a_value_and_for_the_whole_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "crm_hooks.py").write_text(
        textwrap.dedent("""
        def initials(value):
            return "".join(w[0] for w in value.split())

        def enrich(record, person):
            if record.get("Test") == "yes":
                raise ValueError("test signups are not captured")
            return {**person, "notes": f"imported from row {record['Row']}"}
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    m = mapping(
        {
            "name": "Name",
            "email": "Email",
            "custom_fields": {"initials": {"field": "Name", "transform": "crm_hooks:initials"}},
            "hook": "crm_hooks:enrich",
        }
    )
    assert m.map({"Name": "Ann Lee", "Email": "a@example.com", "Row": 7}) == PersonInput(
        name="Ann Lee", email="a@example.com", notes="imported from row 7", custom_fields={"initials": "AL"}
    )
    rejected = m.map({"Name": "Ann Lee", "Email": "a@example.com", "Row": 8, "Test": "yes"})
    assert rejected == Rejection(["hook crm_hooks:enrich failed: ValueError: test signups are not captured"])


def test_a_sync_runs_a_user_transform_once_per_record_whatever_becomes_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync maps most records without the model, and a record with a problem again with it; a
    user's transform is not asked twice (it may count, log or call out)."""
    (tmp_path / "counting_hooks.py").write_text(
        textwrap.dedent("""
        calls = []

        def tagged(value):
            calls.append(value)
            return value.upper()
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import counting_hooks

    m = mapping(
        {"name": "Name", "email": "Email", "company": {"field": "Company", "transform": "counting_hooks:tagged"}}
    )
    accepted, _ = m.payload_noting({"Name": "Ann", "Email": "a@example.com", "Company": "acme"})
    rejected, _ = m.payload_noting({"Name": "Ann", "Email": "not an email", "Company": "initech"})
    assert accepted == {"name": "Ann", "email": "a@example.com", "company": "ACME"}
    assert isinstance(rejected, Rejection)
    assert counting_hooks.calls == ["acme", "initech"]


def test_every_config_problem_is_reported_at_once_with_its_key() -> None:
    with pytest.raises(ConfigProblem) as info:
        mapping(
            {
                "first": "First",
                "email": {"field": "Email", "transform": "lowercase"},
                "phone": {"field": "Phone", "transform": "e164", "region": "Atlantis"},
                "name": {"template": "{First} {Last!r}"},
                "company": {"field": "Company", "template": "{Org}"},
                "notes": {"field": "Notes", "typo": 1},
                "custom_fields": {"plan": 5},
                "hook": "no_such_module:fn",
            }
        )
    assert info.value.problems == [
        f"{WHERE}.first: not a person field (one of: name, first_name, last_name, email, phone, company, job_title, notes, custom_fields, hook)",
        f"{WHERE}.email.transform: unknown transform 'lowercase' (known: strip, lower, upper, first_name, last_name, e164, or \"package.module:function\")",
        f"{WHERE}.phone.region: 'Atlantis' is not a region code like US or GB",
        f"{WHERE}.name.template: {{Last}} has a format spec or conversion, which are not supported",
        f"{WHERE}.company: needs exactly one of `field`, `template` or `constant` (has field, template)",
        f"{WHERE}.notes.typo: unknown option",
        f'{WHERE}.custom_fields.plan: must be a field name or a table like {{ field = "Email", transform = "lower" }}',
        f"{WHERE}.hook: cannot load 'no_such_module:fn': No module named 'no_such_module'",
    ]


def test_a_mapping_that_can_never_satisfy_the_api_is_refused_when_loading() -> None:
    with pytest.raises(ConfigProblem) as info:
        mapping({"company": "Company", "email": "Email"})
    assert info.value.problems == [f"{WHERE}: maps neither `name` nor `first_name`, so every record would be rejected"]


def test_the_version_is_stable_and_follows_the_config() -> None:
    assert mapping(DESIGN_EXAMPLE).version == mapping(dict(reversed(DESIGN_EXAMPLE.items()))).version
    changed = {**DESIGN_EXAMPLE, "email": {"field": "Email"}}
    assert mapping(changed).version != mapping(DESIGN_EXAMPLE).version
    assert len(mapping(DESIGN_EXAMPLE).version) == 12
