"""`on_error`: a field whose value cannot be used rejects the record (the default) or is dropped
with a note, whether the mapping's transforms or the API's own rules refuse it."""

from __future__ import annotations

import pytest

from connector.api.models import PersonInput
from connector.mapping import Mapping, Rejection
from connector.problems import ConfigProblem

WHERE = "sources.signups.mapping"


def mapping(on_error: str, **more: object) -> Mapping:
    return Mapping.from_config(
        {
            "name": "Name",
            "email": {"field": "Email", "on_error": on_error},
            "phone": {"field": "Phone", "transform": "e164", "region": "US", "on_error": on_error},
            **more,
        },
        where=WHERE,
    )


JUNK_PHONE = {"Name": "Ann", "Email": "ann@example.com", "Phone": "call me"}


def test_a_junk_phone_next_to_a_valid_email_is_dropped_with_a_note() -> None:
    person, notes = mapping("drop").map_noting(JUNK_PHONE)
    assert person == PersonInput(name="Ann", email="ann@example.com")
    assert notes == ("phone (from `Phone`): dropped: is not a phone number",)


def test_a_junk_phone_rejects_the_record_by_default() -> None:
    for m in (
        mapping("reject"),
        Mapping.from_config(
            {"name": "Name", "email": "Email", "phone": {"field": "Phone", "transform": "e164", "region": "US"}},
            where=WHERE,
        ),
    ):
        result, notes = m.map_noting(JUNK_PHONE)
        assert result == Rejection(["phone (from `Phone`): is not a phone number"])
        assert notes == ()
        assert m.map(JUNK_PHONE) == result


def test_an_email_the_api_model_refuses_follows_its_field_policy() -> None:
    record = {"Name": "Ann", "Email": "not an email", "Phone": "(415) 555-0100"}
    person, notes = mapping("drop").map_noting(record)
    assert person == PersonInput(name="Ann", phone="+14155550100")
    [note] = notes
    assert note.startswith("email (from `Email`): dropped: `email` is not a valid email address")
    rejected, _ = mapping("reject").map_noting(record)
    assert isinstance(rejected, Rejection)
    [reason] = rejected.reasons
    assert reason.startswith("`email` is not a valid email address") and reason.endswith("(from `Email`)")


def test_dropping_the_only_contact_field_rejects_the_record_with_the_reasons() -> None:
    result, notes = mapping("drop").map_noting({"Name": "Ann", "Email": "not an email", "Phone": "call me"})
    assert notes == ()
    assert isinstance(result, Rejection)
    assert result.reasons[0] == "phone (from `Phone`): dropped: is not a phone number"
    assert result.reasons[1].startswith("email (from `Email`): dropped: `email` is not a valid email address")
    assert result.reasons[2] == "needs `email` or `phone`"


def test_a_dropped_field_does_not_excuse_a_rejected_one() -> None:
    m = mapping("drop", company={"field": "Company"})
    result, notes = m.map_noting(
        {"Name": "Ann", "Email": "ann@example.com", "Phone": "call me", "Company": ["a", "list"]}
    )
    assert notes == ()
    assert result == Rejection(
        ["phone (from `Phone`): dropped: is not a phone number", "company (from `Company`): is a list, not text"]
    )


def test_a_custom_field_can_be_dropped() -> None:
    m = mapping("reject", custom_fields={"score": {"field": "Score", "on_error": "drop"}, "plan": "Plan"})
    person, notes = m.map_noting({"Name": "Ann", "Email": "ann@example.com", "Score": float("nan"), "Plan": "pro"})
    assert person == PersonInput(name="Ann", email="ann@example.com", custom_fields={"plan": "pro"})
    assert notes == ("custom_fields.score (from `Score`): dropped: is not a finite number",)


def test_clean_records_have_no_notes() -> None:
    person, notes = mapping("drop").map_noting({"Name": "Ann", "Email": "ann@example.com", "Phone": "(415) 555-0100"})
    assert person == PersonInput(name="Ann", email="ann@example.com", phone="+14155550100")
    assert notes == ()


def test_on_error_takes_reject_or_drop_and_changes_the_mapping_version() -> None:
    with pytest.raises(ConfigProblem) as info:
        mapping("skip")
    assert [p.split(":")[0] for p in info.value.problems] == [f"{WHERE}.email.on_error", f"{WHERE}.phone.on_error"]
    assert mapping("drop").version != mapping("reject").version
