"""The matcher's shortcuts read members and echoes exactly as the plain reading does: phone digits
without the regular expression for E.164 spellings, a batch's payloads parsed in one call, only their
email and phone built as Python objects, an echo spelled as the keyed member's own taken as its own
without normalising either, and a response whose objects line up one per member settled without the
batch-wide checks."""

from __future__ import annotations

import json
import re
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.api import BulkCaptureResult
from connector.delivery import settle
from connector.delivery._identities import Identities, contacts, digits, payloads
from connector.delivery._objects import keyed_flat
from connector.delivery.settle import _match, _scan, match_bulk
from connector.ledger import Member

from .test_matching import members, result, states
from .test_settle_properties import batch_of, respond, scenarios

SPELLINGS = st.one_of(
    st.text(),
    st.text(alphabet="0123456789+ -()٠١٢٣۴²", max_size=20),
    st.from_regex(r"\+?[0-9]{0,16}", fullmatch=True),
)


@given(SPELLINGS)
def test_digits_are_those_the_regular_expression_keeps(value):
    assert digits(value) == re.sub(r"\D", "", value).lstrip("0")


@given(st.lists(st.dictionaries(st.text(max_size=5), st.one_of(st.text(), st.integers(), st.none())), max_size=5))
def test_a_batch_parsed_at_once_equals_each_payload_parsed_alone(people):
    batch = [Member(pos, f"k{pos}", json.dumps(p, ensure_ascii=False)) for pos, p in enumerate(people)]
    assert payloads(batch) == [json.loads(m.payload) for m in batch]


def test_a_payload_that_is_not_one_json_value_falls_back_to_parsing_each():
    # Joined, `1,2` and `3` would read as three values: the count no longer matches the members.
    batch = [Member(0, "k0", "1,2"), Member(1, "k1", "3")]
    with pytest.raises(json.JSONDecodeError, match="Extra data"):
        payloads(batch)


def test_echoes_still_place_members_after_the_one_call_parse():
    batch = members(4)
    assert states(match_bulk(batch, result("array_index", batch, ["captured", "failed", "duplicate", "captured"]))) == [
        "captured",
        "failed",
        "duplicate",
        "captured",
    ]


@settings(max_examples=400, deadline=None)
@given(scenarios)
def test_the_one_object_per_member_shortcut_settles_as_the_full_reading_does(s):
    """Every scenario of the settlement properties (each shape, random mixes, lies): `match_bulk`,
    which takes the shortcut where the objects line up one per member, equals the full reading."""
    batch = batch_of(s)
    data = respond(s, batch).data
    assert match_bulk(batch, data) == _match(batch, _scan(batch, data))[0]


# --- the payloads' emails and phones, and echoes compared as spelled ----------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["email", "phone", "x"]), inner),
    max_leaves=6,
)
PAYLOADS = st.one_of(
    st.dictionaries(st.sampled_from(["email", "phone", "name", "custom_fields", "Email"]), JSON, max_size=5),
    JSON,
)


@given(st.lists(st.tuples(PAYLOADS, st.booleans()), max_size=6))
def test_the_two_field_parse_finds_the_email_and_phone_that_parsing_each_payload_finds(people):
    """Objects or not (a hand-edited ledger), nested fields of the same names, any value."""
    batch = [Member(pos, f"k{pos}", json.dumps(p, ensure_ascii=ascii)) for pos, (p, ascii) in enumerate(people)]
    whole = [json.loads(m.payload) for m in batch]
    assert contacts(batch) == [
        {k: p[k] for k in ("email", "phone") if k in p} if isinstance(p, dict) else {} for p in whole
    ]


@pytest.mark.parametrize(
    ("payload", "found"),
    [
        ('{"email":"a@x.com","email":"b@x.com"}', {"email": "b@x.com"}),  # the last of a repeated name, as json.loads
        ('{"custom_fields":{"email":"c@x.com"},"phone":"+12025550100"}', {"phone": "+12025550100"}),
        ('{"email":"\\ud800@x.com"}', {"email": "\ud800@x.com"}),  # a lone surrogate: parsed whole instead
        ('["a@x.com"]', {}),
    ],
)
def test_the_two_field_parse_on_payloads_of_odd_shapes(payload, found):
    assert contacts([Member(1, "k1", payload), Member(2, "k2", '{"email":"d@x.com"}')]) == [found, {"email": "d@x.com"}]


class PlainIdentities(Identities):
    """The plain reading: each payload parsed whole by `json.loads`, and every echo normalised and
    compared normalised (no echo ever counts as spelled like the member's own)."""

    class _NeverSpelled(dict):
        def get(self, key: Any, default: Any = None) -> Any:
            return object()

    def spelled(self, pos: int) -> dict[str, Any]:
        return self._NeverSpelled()

    def normalised(self, pos: int) -> tuple[str, str]:
        person = json.loads(self._members[pos].payload)
        person = person if isinstance(person, dict) else {}
        email = person.get("email")
        return (email.strip().lower() if isinstance(email, str) else "", digits(person.get("phone")))


def plain_reading(batch: list[Member], data: BulkCaptureResult) -> tuple[list[Any], list[tuple[Any, ...]]]:
    """The outcomes of the full matching with the plain identities, and what it judged of each object."""
    with mock.patch.object(settle, "Identities", PlainIdentities):
        found = _scan(batch, data)
        judged = [(f.named.copy(), [fit.copy() for fit in f.fits], f.member) for f in found]
        return _match(batch, found)[0], judged


def judged(batch: list[Member], data: BulkCaptureResult) -> list[tuple[Any, ...]]:
    return [(f.named, f.fits, f.member) for f in _scan(batch, data)]


@settings(max_examples=400, deadline=None)
@given(scenarios)
def test_the_matching_equals_the_plain_reading_in_every_settlement_scenario(s):
    batch = batch_of(s)
    data = respond(s, batch).data
    outcomes, seen = plain_reading(batch, data)
    assert match_bulk(batch, data) == outcomes
    assert judged(batch, data) == seen


EMAILS = ("ann@example.com", "bob@example.com")
PHONES = ("+12025550101", "+12025550102", "+442071234567")


def _email_spelling(email: str) -> st.SearchStrategy[str]:
    return st.sampled_from([email, email.upper(), f"  {email.title()} ", ""])


def _phone_spelling(phone: str) -> st.SearchStrategy[str]:
    national = f"({phone[2:5]}) {phone[5:8]}-{phone[8:]}"
    return st.sampled_from([phone, phone[1:], "00" + phone[1:], national, phone[-8:], phone[-7:], " "])


@st.composite
def spelled_batches(draw: st.DrawFn) -> tuple[list[Member], BulkCaptureResult]:
    """Members whose payloads spell a few shared emails and phones every way, and objects echoing
    them, any member's, spelled any way, beside keys of their own or another member's, at any depth."""
    n = draw(st.integers(1, 5))
    batch = []
    for pos in range(n):
        person: dict[str, Any] = {"name": f"P{pos}"}
        for field, pool, spell in (("email", EMAILS, _email_spelling), ("phone", PHONES, _phone_spelling)):
            kind = draw(st.sampled_from(["spelled", "spelled", "absent", "number"]))
            if kind == "spelled":
                person[field] = draw(st.sampled_from(pool).flatmap(spell))
            elif kind == "number":
                person[field] = 5
        batch.append(Member(100 + pos, f"p-{pos:040x}", json.dumps(person)))
    arrays: dict[str, list[Any]] = {"successful": [], "duplicates": [], "failed": []}
    for _ in range(draw(st.integers(0, n + 1))):
        obj: dict[str, Any] = {}
        for key in draw(st.lists(st.integers(0, n - 1), max_size=2)):
            obj.setdefault("idempotency_key", batch[key].key)
            obj.setdefault("input", {})["idempotency_key"] = batch[key].key
        if draw(st.booleans()):
            obj["email"] = draw(st.sampled_from(EMAILS).flatmap(_email_spelling))
        if draw(st.booleans()):
            obj.setdefault("input", {})["phone"] = draw(st.sampled_from(PHONES).flatmap(_phone_spelling))
        if draw(st.booleans()):
            obj["mobile"] = [draw(st.sampled_from(PHONES).flatmap(_phone_spelling))]
        if draw(st.booleans()):
            obj["index"] = draw(st.integers(-1, n + 1))
        obj[draw(st.sampled_from(["person_id", "id"]))] = f"id-{len(arrays['successful'])}"
        arrays[draw(st.sampled_from(sorted(arrays)))].append(obj)
    return batch, BulkCaptureResult(**arrays)


@settings(max_examples=400, deadline=None)
@given(spelled_batches())
def test_echoes_spelled_any_way_are_judged_as_the_plain_reading_judges_them(case):
    batch, data = case
    outcomes, seen = plain_reading(batch, data)
    assert match_bulk(batch, data) == outcomes
    assert judged(batch, data) == seen


# --- the shortcut for flat objects that each echo one member's key -------------------------------------

FLAT_NAMES = ("idempotency_key", "key", "email", "phone", "mobile", "person_id", "id", "index", "error", "reason", "x")


@st.composite
def flat_answers(draw: st.DrawFn) -> tuple[list[Member], BulkCaptureResult]:
    """Answers near the shortcut's edge: mostly one flat object per member echoing its key beside any
    of the evidence fields, with now and then a second key, another member's echo, an echo spelled
    otherwise, a nested value, a missing or repeated object, or an object in another array."""
    batch, _ = draw(spelled_batches())
    n = len(batch)
    order = draw(st.permutations(range(n)))
    if draw(st.integers(0, 4)) == 0:
        order = draw(st.lists(st.integers(0, n - 1), max_size=n + 1))
    value = st.one_of(
        st.sampled_from([m.key for m in batch]),
        st.sampled_from(EMAILS).flatmap(_email_spelling),
        st.sampled_from(PHONES).flatmap(_phone_spelling),
        st.integers(-1, n + 1),
        st.booleans(),
        st.none(),
        st.text(max_size=3),
        st.just({"code": "x", "message": "bad"}),
        st.just(["y"]),
    )
    arrays: dict[str, list[Any]] = {"successful": [], "duplicates": [], "failed": []}
    for pos in order:
        obj: dict[str, Any] = {"idempotency_key": batch[pos].key}
        own = json.loads(batch[pos].payload)
        for name in ("email", "phone"):
            if isinstance(own.get(name), str) and draw(st.booleans()):
                obj[name] = own[name]
        obj.update(draw(st.dictionaries(st.sampled_from(FLAT_NAMES), value, max_size=3)))
        arrays[draw(st.sampled_from(sorted(arrays)))].append(obj)
    return batch, BulkCaptureResult(**arrays)


@settings(max_examples=600, deadline=None)
@given(flat_answers())
def test_the_keyed_flat_shortcut_settles_as_the_full_reading_does(case):
    batch, data = case
    assert match_bulk(batch, data) == _match(batch, _scan(batch, data))[0]


@pytest.mark.parametrize("truths", [["captured"] * 5, ["captured", "failed", "duplicate", "captured", "failed"]])
def test_the_sandbox_echo_shape_takes_the_keyed_flat_shortcut(truths):
    batch = members(5)
    data = result("echo", batch, truths)
    by_key = {m.key: pos for pos, m in enumerate(batch)}
    assert keyed_flat(batch, data, by_key, Identities(batch)) == match_bulk(batch, data)
    assert states(match_bulk(batch, data)) == truths
