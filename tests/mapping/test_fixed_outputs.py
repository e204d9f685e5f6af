"""What a sync stores of a record is fixed for good: its payload's bytes (`Mapping.encoded_noting`),
their digest (`keys.content_hash`) and the person key made of it (`keys.person_key`). A ledger written
by an earlier release is compared with them, so a change of a single byte would send every record
again (or hide a change). The values below were made at ae6a1ab, before the ninth session's fast paths."""

from __future__ import annotations

import enum
from typing import Any

import pytest

from connector.keys import content_hash, person_key
from connector.mapping import Mapping, Rejection

MAPPING = {
    "first_name": "First",
    "last_name": "Last",
    "name": {"template": "{First} {Last}"},
    "email": {"field": "Email", "transform": ["strip", "lower"]},
    "phone": {"field": "Phone", "transform": "e164", "region": "US"},
    "company": "Company",
    "notes": {"template": "{Notes} / 100% {Company}"},
    "custom_fields": {"plan": "Plan", "seats": "Seats"},
}

RECORDS: list[tuple[dict[str, Any], bytes | list[str]]] = [
    (
        {"First": "Ada", "Last": "Lovelace", "Email": " Ada.L@Example.COM ", "Phone": "(415) 555-0134"}
        | {"Company": "Acme", "Plan": "pro", "Seats": "3", "Notes": "vip"},
        b'{"name":"Ada Lovelace","first_name":"Ada","last_name":"Lovelace","email":"ada.l@example.com",'
        b'"phone":"+14155550134","company":"Acme","notes":"vip / 100% Acme","custom_fields":{"plan":"pro","seats":"3"}}',
    ),
    (
        {"First": "Zo\u00eb", "Last": " ", "Email": "zoe@example.org", "Phone": "+44 20 7946 0958", "Company": None}
        | {"Plan": "", "Seats": 5},
        b'{"name":"Zo\xc3\xab","first_name":"Zo\xc3\xab","email":"zoe@example.org","phone":"+442079460958",'
        b'"custom_fields":{"seats":5}}',
    ),
    (
        {"First": "Bo", "Last": "Li", "Email": "bo@x.io", "Phone": "415.555.0123", "Plan": "free", "Seats": 2.5}
        | {"Notes": "  "},
        b'{"name":"Bo Li","first_name":"Bo","last_name":"Li","email":"bo@x.io","phone":"+14155550123",'
        b'"custom_fields":{"plan":"free","seats":2.5}}',
    ),
    (
        {"First": "  ", "Last": "Kim", "Email": "kim@b.example", "Phone": "", "Company": "K%s", "Notes": "  "}
        | {"Plan": ["a", 1]},
        b'{"name":"Kim","last_name":"Kim","email":"kim@b.example","company":"K%s","notes":"/ 100% K%s",'
        b'"custom_fields":{"plan":["a",1]}}',
    ),
    (
        {"First": "Al", "Email": "not-an-email", "Phone": "1-415-555-0123"},
        ["`email` is not a valid email address: An email address must have an @-sign. (from `Email`)"],
    ),
    (
        {"First": "Al", "Email": "al@b.local", "Phone": "1-415-555-0123"},
        [
            "`email` is not a valid email address: The part after the @-sign is a special-use or reserved name "
            "that cannot be used with email. (from `Email`)"
        ],
    ),
]


@pytest.mark.parametrize(("record", "stored"), RECORDS)
def test_a_record_is_stored_as_the_same_bytes(record: dict[str, Any], stored: bytes | list[str]) -> None:
    mapping = Mapping.from_config(MAPPING, where="m")
    result, notes = mapping.encoded_noting(record)
    assert (result if isinstance(result, bytes) else result.reasons, notes) == (stored, ())
    payload, _ = mapping.payload_noting(record)
    assert isinstance(payload, Rejection) == isinstance(stored, list)


@pytest.mark.parametrize(
    ("payload", "digest"),
    [
        (b"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        (b'{"name":"Ada"}', "88bab6d8f6dc68a877064d584cbb5b6c50e74f617ea50d81d3a53c2ee6ffbc4f"),
        ('{"name":"Zo\u00eb"}'.encode(), "6bd0ee7972d372ec1f8a3cc44302e5449751305d73c2b69b5a79c62f88a4ca77"),
    ],
)
def test_a_payloads_digest_is_the_same(payload: bytes, digest: str) -> None:
    assert content_hash(payload) == digest


@pytest.mark.parametrize(
    ("parts", "key"),
    [
        (("crm", "42", "ab" * 32, 0), "p-3f294f0cf99bffa312ecb7ddd186bd69c90cc0d9"),
        (("export", "r-\u00e9-1", "0" * 64, 3), "p-53543b85f89ed8e057663ce27ca0bf8cf7c0cb12"),
        (("s", "", "", 12345678901234), "p-d33d5e9a0f81cc0f1b4f338e0103bbb5955aa588"),
    ],
)
def test_a_person_key_is_the_same(parts: tuple[str, str, str, int], key: str) -> None:
    assert person_key(*parts) == key


def test_a_person_key_spells_an_id_by_its_characters() -> None:
    """An id of a str subclass whose `str()` differs (a `(str, Enum)` member): its key is the one its
    characters make, as before (an f-string would spell it `Kind.A`, review R13)."""

    class Kind(str, enum.Enum):  # noqa: UP042 (not StrEnum: its str() is its value, this one's is Kind.A)
        A = "42"

    assert person_key("crm", Kind.A, "ab" * 32, 0) == "p-3f294f0cf99bffa312ecb7ddd186bd69c90cc0d9"
