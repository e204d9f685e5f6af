"""`Checker.check`'s fast path answers exactly as `Checker.checked`, every rule in turn, on whatever
a plugin may yield: the item passed as it is, the same rejection, or the same slip."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from connector.delivery import Checker, Slip
from connector.source import Record


class _Id(str):
    """A str subclass (a `(str, Enum)` member's kind): kept as its characters, never as it is."""


ids = st.one_of(
    st.text(max_size=12),  # control characters, lone surrogates, blanks
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=240, max_size=260),  # around _SURELY_SHORT
    st.text(st.sampled_from("aé\u4e00\U0001f600"), min_size=240, max_size=1100),  # beyond MAX_ID_BYTES in UTF-8
    st.text(min_size=1, max_size=6).map(_Id),
    st.none(),
    st.integers(),
)
datas = st.one_of(
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=3),
    st.builds(OrderedDict, st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)),
    st.none(),
    st.lists(st.integers(), max_size=2),
)
orders = st.one_of(st.none(), st.integers(), st.floats(), st.text(max_size=3), st.just([1]))
states = st.one_of(
    st.none(), st.integers(), st.floats(), st.dictionaries(st.text(max_size=2), st.integers() | st.floats(), max_size=2)
)


def _outcome(check: Any, item: Any) -> Any:
    try:
        return "passed", check(item)
    except Slip as slip:
        return "slip", str(slip)


@given(ids, datas, states, st.one_of(st.none(), st.text(max_size=4)), orders, st.booleans())
@example("r1", {"Name": "Ada"}, {"file": "a.csv"}, "a.csv line 2", None, False)
@example(" ", {}, None, None, None, False)
@example("a\x00b", {}, None, None, None, False)
@example("x" * 251, {}, None, None, None, False)
@example("\U0001f600" * 251, {}, None, None, None, False)
def test_the_fast_path_answers_as_every_rule_does(
    rid: Any, data: Any, state: Any, where: str | None, order: Any, walk_states: bool
) -> None:
    item = Record(rid, data, state, where, order)
    fast = _outcome(Checker(states=walk_states).check, item)
    full = _outcome(Checker(states=walk_states).checked, item)
    assert fast == full
    if fast[0] == "passed":  # `==` takes an id of a str subclass for its characters: the type too
        assert type(fast[1].id) is type(full[1].id)
        if full[1] is item:
            assert fast[1] is item


def test_an_id_of_a_str_subclass_comes_out_as_plain_text() -> None:
    """A `(str, Enum)` id spelt by `str()` would be `Kind.A` in the ledger: the fast path must not pass it."""
    out = Checker(states=False).check(Record(_Id("a1"), {"Name": "Ada"}, None, None, None))
    assert type(out.id) is str and out.id == "a1"
