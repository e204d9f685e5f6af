"""What the plugin boundary says about a slip deep inside a state, or in an id: the path it names is
spelled only when there is a problem, so it must still be exact (a plugin author follows it)."""

from __future__ import annotations

from typing import Any

import pytest

from connector.delivery import Checker, Slip
from connector.source import Record


def slip_of(state: Any, rid: str = "r1") -> str | None:
    try:
        Checker().check(Record(rid, {"Name": "Ada"}, state))
    except Slip as slip:
        return str(slip)
    return None


@pytest.mark.parametrize(
    ("state", "said"),
    [
        (
            {"files": [{"at": 1.5}, {"at": float("nan")}]},
            "the state holds nan at state['files'][1]['at'], which JSON cannot hold",
        ),
        ({"a": {1: "x"}}, "the state has a int key 1 at state['a']: JSON keys are strings"),
        ({"a": ("ok", {"b": {1, 2}})}, "the state holds a set at state['a'][1]['b'], which JSON cannot hold"),
        (b"raw", "the state holds a bytes at state, which JSON cannot hold"),
    ],
)
def test_a_bad_value_deep_in_a_state_is_named_by_its_whole_path(state: Any, said: str) -> None:
    assert slip_of(state) is not None and said in slip_of(state)  # type: ignore[operator]


def test_a_state_nested_too_deep_names_the_level_where_it_stops() -> None:
    state: Any = "end"
    for _ in range(70):
        state = [state]
    assert slip_of(state) == f"the state nests deeper than 64 levels at state{'[0]' * 64}"


def test_a_state_of_json_values_passes_and_a_shared_large_list_is_walked_once() -> None:
    done = [f"file-{i}" for i in range(100)]
    checker = Checker()
    for line in range(3):
        checker.check(Record(f"r{line}", {}, {"file": "a.csv", "line": line, "tail": (10, 99), "done": done}))
    done.append(object())  # walked already: the same list is not walked again (the memo's documented trade)
    checker.check(Record("r9", {}, {"done": done}))
    assert slip_of({"done": done}) is not None  # a new read walks it


@pytest.mark.parametrize(("rid", "passes"), [("Zoë-7", True), ("a\x85b", False), ("a\tb", False), ("ok id", True)])
def test_an_id_with_a_control_character_is_refused_and_printable_text_passes(rid: str, passes: bool) -> None:
    said = slip_of({}, rid)
    assert (said is None) if passes else (said is not None and "holds a control character" in said)
