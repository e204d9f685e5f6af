"""Only an answer's `person_id` (the field the spec names, 2.5) can tell that the CRM merged a record
into a person another record holds: a bulk object's bare `id` may be anything (spec 2.6 shows no
fields), so a merge is never counted from it."""

from __future__ import annotations

import json
from uuid import uuid4

from connector.api.models import BulkCaptureResult, PersonCaptureResult
from connector.delivery import match_bulk, person_outcome
from connector.ledger import Member


def _member(pos: int) -> Member:
    return Member(entry_id=pos, key=f"p-{pos:040x}", payload=json.dumps({"name": "P", "email": f"p{pos}@example.org"}))


def test_a_named_person_id_is_evidence_of_the_person_and_a_bare_id_is_not() -> None:
    members = [_member(0), _member(1)]
    named, bare = match_bulk(
        members,
        BulkCaptureResult(
            successful=[
                {"idempotency_key": members[0].key, "person_id": "p-1"},
                {"idempotency_key": members[1].key, "result": {"id": "p-1"}},
            ],
            duplicates=[],
            failed=[],
        ),
    )
    assert (named.state, named.person_id, named.named_person) == ("captured", "p-1", True)
    assert (bare.state, bare.person_id, bare.named_person) == ("captured", "p-1", False)


def test_post_person_always_names_its_person() -> None:
    person_id = uuid4()
    outcome = person_outcome(_member(0), PersonCaptureResult(person_id=person_id))
    assert outcome.named_person and outcome.person_id == str(person_id)
