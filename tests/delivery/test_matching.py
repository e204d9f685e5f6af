"""match_bulk on each result shape the sandbox can answer with: what is placed, what stays unknown and why.

The builders below make the same objects by hand as `--bulk-result-shape` does; the property tests
in test_settle_properties.py reuse them.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from connector.api import BulkCaptureResult
from connector.delivery import match_bulk
from connector.ledger import Member, Outcome

ARRAY = {"captured": "successful", "duplicate": "duplicates", "failed": "failed"}


def member(pos: int, email: str | None = "", phone: str | None = "") -> Member:
    """Member `pos`: its own email and an E.164 phone unless told otherwise (None: no such field)."""
    person = {"name": f"Person {pos}"}
    if email is not None:
        person["email"] = email or f"person{pos}@example.com"
    if phone is not None:
        person["phone"] = phone or f"+1202555{pos:04d}"
    return Member(entry_id=100 + pos, key=f"p-{pos:040x}", payload=json.dumps(person, separators=(",", ":")))


def members(n: int) -> list[Member]:
    return [member(pos) for pos in range(n)]


def person_id(pos: int) -> str:
    return f"00000000-0000-4000-8000-{pos:012d}"


def sent(m: Member) -> dict:
    """The person as the bulk body carried it."""
    return {**json.loads(m.payload), "idempotency_key": m.key}


def failure(pos: int) -> dict:
    return {"code": "invalid_person", "message": f"bad person {pos}"}


def _echo(m: Member, pos: int, truth: str) -> dict:
    person = sent(m)
    obj = {"index": pos, **{k: person[k] for k in ("idempotency_key", "email", "phone") if k in person}}
    if truth == "failed":
        return {**obj, "person_id": None, "error": failure(pos)}
    return {**obj, "person_id": person_id(pos), "action": "created"}


def _nested(m: Member, pos: int, truth: str) -> dict:
    if truth == "failed":
        return {"input": sent(m), "errors": [failure(pos)]}
    return {"result": {"id": person_id(pos), "action": "created"}, "input": sent(m)}


def _index1(m: Member, pos: int, truth: str) -> dict:
    if truth == "failed":
        return {"index": pos + 1, "error": failure(pos)}
    return {"index": pos + 1, "person_id": person_id(pos)}


def _array_index(m: Member, pos: int, truth: str) -> dict:
    """`index` is filled in by `result` once the array's order is known."""
    email = json.loads(m.payload).get("email")
    obj = {"email": email.upper()} if email else {}
    return {**obj, "error": failure(pos)} if truth == "failed" else {**obj, "person_id": person_id(pos)}


def _bare(m: Member, pos: int, truth: str) -> dict:
    return {"error": failure(pos)} if truth == "failed" else {"person_id": person_id(pos)}


SHAPES: dict[str, Callable[[Member, int, str], dict]] = {
    "echo": _echo,
    "nested": _nested,
    "index1": _index1,
    "array_index": _array_index,
    "bare": _bare,
}


def result(shape: str, batch: list[Member], truths: list[str]) -> BulkCaptureResult:
    """The bulk `data` for `truths` (one per member: captured, duplicate, failed or omitted)."""
    arrays: dict[str, list[dict]] = {"successful": [], "duplicates": [], "failed": []}
    for pos, (m, truth) in enumerate(zip(batch, truths, strict=True)):
        if truth != "omitted":
            arrays[ARRAY[truth]].append(SHAPES[shape](m, pos, truth))
    if shape == "array_index":
        for name, objs in arrays.items():
            arrays[name] = [{**obj, "index": i} for i, obj in enumerate(reversed(objs))]
    return BulkCaptureResult(**arrays)


def states(outcomes: list[Outcome]) -> list[str]:
    return [o.state for o in outcomes]


def bulk(successful=(), duplicates=(), failed=()) -> BulkCaptureResult:
    return BulkCaptureResult(successful=list(successful), duplicates=list(duplicates), failed=list(failed))


MIXED = ["captured", "failed", "duplicate", "captured", "omitted"]


# --- the five shapes ------------------------------------------------------------------------------


def test_echo_places_every_listed_member_and_leaves_the_unlisted_one_unknown():
    batch = members(5)
    outcomes = match_bulk(batch, result("echo", batch, MIXED))

    assert [o.entry_id for o in outcomes] == [m.entry_id for m in batch]
    assert states(outcomes) == ["captured", "failed", "duplicate", "captured", "unknown"]
    assert [o.person_id for o in outcomes] == [person_id(0), None, person_id(2), person_id(3), None]
    assert outcomes[1].error == "invalid_person: bad person 1"
    assert outcomes[4].error == "the server listed no result object for this person"


def test_nested_places_by_the_key_inside_input_and_takes_the_id_from_result():
    batch = members(5)
    outcomes = match_bulk(batch, result("nested", batch, MIXED))

    assert states(outcomes) == ["captured", "failed", "duplicate", "captured", "unknown"]
    assert [o.person_id for o in outcomes[:4]] == [person_id(0), None, person_id(2), person_id(3)]
    assert outcomes[1].error == "invalid_person: bad person 1"


def test_index1_with_mixed_outcomes_is_read_as_counting_from_one():
    batch = members(4)
    outcomes = match_bulk(batch, result("index1", batch, MIXED[:4]))

    assert states(outcomes) == ["captured", "failed", "duplicate", "captured"]
    assert [o.person_id for o in outcomes] == [person_id(0), None, person_id(2), person_id(3)]


def test_index1_in_one_array_settles_by_count_without_person_ids():
    # 1..n in array order is also what a per-array numbering gives, so the indices prove nothing
    # about who is who: the state is certain by count, the person ids are not.
    batch = members(3)
    outcomes = match_bulk(batch, result("index1", batch, ["captured"] * 3))

    assert states(outcomes) == ["captured"] * 3
    assert [o.person_id for o in outcomes] == [None] * 3


def test_array_index_places_by_the_upper_cased_email_not_by_the_per_array_index():
    batch = members(5)
    outcomes = match_bulk(batch, result("array_index", batch, MIXED))

    assert states(outcomes) == ["captured", "failed", "duplicate", "captured", "unknown"]
    assert [o.person_id for o in outcomes[:4]] == [person_id(0), None, person_id(2), person_id(3)]


def test_a_per_array_index_never_makes_a_failed_person_captured():
    # The old matcher read successful[0]'s per-array index 0 as the failed person #0.
    batch = members(3)
    truths = ["failed", "captured", "captured"]
    data = result("array_index", batch, truths)
    for objs in (data.successful, data.failed):
        for obj in objs:
            del obj["email"]
    outcomes = match_bulk(batch, data)

    assert states(outcomes) == ["unknown"] * 3
    assert all("spread over successful and failed" in o.error for o in outcomes)


def test_bare_with_mixed_outcomes_leaves_every_member_unknown():
    batch = members(4)
    outcomes = match_bulk(batch, result("bare", batch, MIXED[:4]))

    assert states(outcomes) == ["unknown"] * 4
    assert all(o.person_id is None and o.error for o in outcomes)


def test_bare_all_successful_settles_by_count_without_person_ids():
    batch = members(4)
    outcomes = match_bulk(batch, result("bare", batch, ["captured"] * 4))

    assert states(outcomes) == ["captured"] * 4
    assert [o.person_id for o in outcomes] == [None] * 4


def test_bare_all_failed_keeps_the_reason_only_if_they_share_it():
    batch = members(2)
    shared = match_bulk(batch, bulk(failed=[{"error": {"code": "x", "message": "no"}}] * 2))
    distinct = match_bulk(batch, result("bare", batch, ["failed"] * 2))

    assert [(o.state, o.error) for o in shared] == [("failed", "x: no")] * 2
    assert states(distinct) == ["failed"] * 2
    assert (
        distinct[0].error == "the server listed this person as failed; its reason is one of: "
        "invalid_person: bad person 0; invalid_person: bad person 1"
    )


def test_bare_with_a_person_missing_does_not_settle_by_count():
    batch = members(3)
    outcomes = match_bulk(batch, result("bare", batch, ["captured", "captured", "omitted"]))

    assert states(outcomes) == ["unknown"] * 3
    assert "2 unplaced result object(s) for 3 unplaced person(s)" in outcomes[0].error


# --- evidence and cross-checks ----------------------------------------------------------------------


def test_a_national_format_phone_echo_places_its_member():
    batch = [member(0, email=None, phone="+12025550100"), member(1, email=None, phone="+12025550101")]
    outcomes = match_bulk(
        batch,
        bulk(
            successful=[{"phone": "(202) 555-0101", "person_id": person_id(1)}],
            failed=[{"phone": "+1 202 555 0100", "error": "blocked"}],
        ),
    )

    assert [(o.state, o.person_id, o.error) for o in outcomes] == [
        ("failed", None, "blocked"),
        ("captured", person_id(1), None),
    ]


def test_a_phone_suffix_too_short_or_shared_is_no_evidence():
    batch = [
        member(0, email=None, phone="+12025550100"),
        member(1, email=None, phone="+12025550101"),
        member(2, email=None, phone="+12025550101"),
    ]
    outcomes = match_bulk(
        batch,
        bulk(
            successful=[{"phone": "555-0100", "person_id": person_id(0)}],  # 7 digits
            failed=[{"phone": "+12025550101", "error": "blocked"}, {"phone": "+12025550101", "error": "blocked"}],
        ),
    )

    assert states(outcomes) == ["unknown"] * 3


def test_a_shared_email_is_no_evidence():
    batch = [member(0, email="same@example.com", phone=None), member(1, email="same@example.com", phone=None)]
    outcomes = match_bulk(
        batch,
        bulk(
            successful=[{"email": "same@example.com", "person_id": person_id(0)}],
            failed=[{"email": "SAME@example.com ", "error": "blocked"}],
        ),
    )

    assert states(outcomes) == ["unknown", "unknown"]


def test_a_key_and_another_members_email_in_one_object_make_both_unknown():
    batch = members(3)
    outcomes = match_bulk(
        batch,
        bulk(
            successful=[
                {"idempotency_key": batch[0].key, "email": "person1@example.com", "person_id": person_id(0)},
                {"idempotency_key": batch[2].key, "person_id": person_id(2)},
            ],
            failed=[{"idempotency_key": batch[1].key, "error": "no"}],
        ),
    )

    assert states(outcomes) == ["unknown", "unknown", "captured"]
    assert "contradictory evidence" in outcomes[0].error and "contradictory evidence" in outcomes[1].error


def test_two_objects_for_one_member_make_it_unknown():
    batch = members(2)
    outcomes = match_bulk(
        batch,
        bulk(
            successful=[{"idempotency_key": batch[0].key}, {"idempotency_key": batch[1].key}],
            failed=[{"nested": {"idempotency_key": batch[0].key}, "error": "no"}],
        ),
    )

    assert states(outcomes) == ["unknown", "captured"]
    assert outcomes[0].error == "2 result objects name this person (successful, failed)"


def test_an_index_that_contradicts_an_echoed_key_is_ignored_for_the_whole_response():
    batch = members(3)
    outcomes = match_bulk(
        batch,
        bulk(
            successful=[
                {"index": 1, "idempotency_key": batch[0].key, "person_id": person_id(0)},
                {"index": 2, "person_id": person_id(2)},
            ],
            failed=[{"index": 0, "error": "no"}],
        ),
    )

    assert states(outcomes) == ["captured", "unknown", "unknown"]
    assert outcomes[0].person_id == person_id(0)


def test_an_index_confirmed_by_an_echoed_key_places_the_objects_without_one():
    batch = members(4)
    outcomes = match_bulk(
        batch,
        bulk(
            successful=[{"index": 3, "person_id": person_id(3)}, {"index": 0, "idempotency_key": batch[0].key}],
            failed=[{"index": 2, "error": "no"}],
        ),
    )

    assert states(outcomes) == ["captured", "unknown", "failed", "captured"]
    assert outcomes[3].person_id == person_id(3)


def test_indices_that_fit_both_bases_are_ignored():
    batch = members(3)
    outcomes = match_bulk(
        batch, bulk(successful=[{"index": 2, "person_id": person_id(2)}], failed=[{"index": 1, "error": "no"}])
    )

    assert states(outcomes) == ["unknown"] * 3


def test_evidence_in_custom_fields_and_conflicting_person_ids_are_not_used():
    batch = members(2)
    outcomes = match_bulk(
        batch,
        bulk(
            successful=[
                {
                    "idempotency_key": batch[0].key,
                    "custom_fields": {"email": "person1@example.com"},
                    "person_id": person_id(0),
                },
                {"idempotency_key": batch[1].key, "person_id": person_id(1), "result": {"person_id": person_id(0)}},
            ]
        ),
    )

    assert [(o.state, o.person_id) for o in outcomes] == [("captured", person_id(0)), ("captured", None)]


def test_a_partial_numbering_that_nothing_confirms_is_not_trusted():
    # Only base 1 fits (3 is out of range from 0), but with a person missing and no echo to confirm
    # it, a server numbering its persons some other way would read the same.
    batch = members(3)
    outcomes = match_bulk(batch, result("index1", batch, ["captured", "omitted", "failed"]))

    assert states(outcomes) == ["unknown"] * 3


def test_a_key_whose_shared_email_belongs_to_others_is_contradictory():
    batch = [member(0, email="same@example.com"), member(1, email="same@example.com"), member(2)]
    outcomes = match_bulk(batch, bulk(successful=[{"idempotency_key": batch[2].key, "email": "same@example.com"}]))

    assert states(outcomes) == ["unknown"] * 3
    assert "contradictory evidence" in outcomes[2].error


def test_an_email_inside_an_error_names_whom_it_clashed_with_not_whom_it_is_about():
    """#0 failed because it clashed with #1, captured just before; the error quotes #1's email."""
    batch = members(2)
    outcomes = match_bulk(
        batch,
        bulk(
            successful=[{"index": 1, "person_id": person_id(1)}],
            failed=[{"index": 0, "error": {"code": "phone_taken", "existing": {"email": "person1@example.com"}}}],
        ),
    )

    assert states(outcomes) == ["failed", "captured"]
    assert outcomes[1].person_id == person_id(1)


def test_an_index_that_contradicts_an_echoed_email_makes_the_person_unknown_and_stops_counting():
    batch = members(3)
    outcomes = match_bulk(
        batch,
        bulk(
            successful=[{"index": 2, "email": "person0@example.com"}, {"index": 1}],
            failed=[{"index": 0, "error": "no"}],
        ),
    )

    assert states(outcomes) == ["unknown", "unknown", "unknown"]
    assert "contradicts" in outcomes[0].error


def test_an_index_alone_landing_on_a_person_its_key_placed_disproves_the_numbering():
    """A per-array numbering with each array counted from another base: index 0 of `duplicates` is not
    person #0, whom a key already placed; the leftover then settles by count."""
    batch = members(3)
    outcomes = match_bulk(
        batch,
        bulk(
            successful=[{"idempotency_key": batch[0].key}],
            duplicates=[{"index": 0}],
            failed=[{"index": 1, "idempotency_key": batch[1].key, "error": "no"}],
        ),
    )

    assert states(outcomes) == ["captured", "failed", "duplicate"]
