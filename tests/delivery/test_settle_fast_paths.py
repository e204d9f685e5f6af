"""The matcher's shortcuts read members and echoes exactly as the plain reading does: phone digits
without the regular expression for E.164 spellings, and a batch's payloads parsed in one call."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.delivery.settle import _digits, _payloads, match_bulk
from connector.ledger import Member

from .test_matching import members, result, states

SPELLINGS = st.one_of(
    st.text(),
    st.text(alphabet="0123456789+ -()٠١٢٣۴²", max_size=20),
    st.from_regex(r"\+?[0-9]{0,16}", fullmatch=True),
)


@given(SPELLINGS)
def test_digits_are_those_the_regular_expression_keeps(value):
    assert _digits(value) == re.sub(r"\D", "", value).lstrip("0")


@given(st.lists(st.dictionaries(st.text(max_size=5), st.one_of(st.text(), st.integers(), st.none())), max_size=5))
def test_a_batch_parsed_at_once_equals_each_payload_parsed_alone(people):
    batch = [Member(pos, f"k{pos}", json.dumps(p, ensure_ascii=False)) for pos, p in enumerate(people)]
    assert _payloads(batch) == [json.loads(m.payload) for m in batch]


def test_a_payload_that_is_not_one_json_value_falls_back_to_parsing_each():
    # Joined, `1,2` and `3` would read as three values: the count no longer matches the members.
    batch = [Member(0, "k0", "1,2"), Member(1, "k1", "3")]
    with pytest.raises(json.JSONDecodeError, match="Extra data"):
        _payloads(batch)


def test_echoes_still_place_members_after_the_one_call_parse():
    batch = members(4)
    assert states(match_bulk(batch, result("array_index", batch, ["captured", "failed", "duplicate", "captured"]))) == [
        "captured",
        "failed",
        "duplicate",
        "captured",
    ]
