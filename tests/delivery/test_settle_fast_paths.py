"""The matcher's shortcuts read members and echoes exactly as the plain reading does: phone digits
without the regular expression for E.164 spellings, a batch's payloads parsed in one call, and a
response whose objects line up one per member settled without the batch-wide checks."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.delivery._identities import digits, payloads
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
