"""A field rule's value is `as_text` of its source value and of each transform's result (values.py's
two rules after every step), and a template's fields are each `as_text` of theirs: the rules take
`as_text`'s plain-text case inline on the hot path, and must answer exactly as the rules say."""

from __future__ import annotations

import string
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from connector.mapping.rules import UNSURE, compile_field, unsure
from connector.mapping.transforms import e164, plain
from connector.mapping.values import ValueProblem, as_text

TRANSFORMS = ["strip", "lower", "upper", "first_name", "last_name", "e164"]

values = st.one_of(
    st.none(),
    st.text(max_size=12),
    st.text(st.sampled_from([" ", "\t", "\n", "\x00", "\u200b", "\u3164", "a", "B", "é", "İ", ",", "5"]), max_size=8),
    st.sampled_from(["  Ada Lovelace ", "(415) 555-0134", "+44 20 7946 0958", "Lovelace, Ada", "ADA@EXAMPLE.COM"]),
    st.integers(),
    st.floats(allow_nan=True),
    st.booleans(),
)


def _outcome(fn: Any) -> tuple[str, Any]:
    try:
        return "value", fn()
    except ValueProblem as exc:
        return "problem", str(exc)


def _by_the_rules(value: Any, names: list[str], default: Any = None) -> Any:
    """The rule's value as the module docstrings define it: as_text before and after each transform,
    the default when that is absent."""
    value = as_text(value)
    for name in names:
        if value is None:
            break
        value = as_text((e164("US") if name == "e164" else plain(name))(value))
    return default if value is None else value


@settings(max_examples=500, deadline=None)
@given(values, st.lists(st.sampled_from(TRANSFORMS), min_size=1, max_size=3), st.sampled_from([None, "x", 5]))
def test_a_rule_with_transforms_gives_as_text_of_every_step(value: Any, names: list[str], default: Any) -> None:
    spec: dict[str, Any] = {"field": "F", "transform": names} | ({"region": "US"} if "e164" in names else {})
    spec |= {"default": default} if default is not None else {}
    rule, problems = compile_field("email", spec, "m", _no_hooks)
    assert rule is not None, problems
    expected = _outcome(lambda: _by_the_rules(value, names, default))
    assert _outcome(lambda: rule.value({"F": value})) == expected
    assert _outcome(lambda: rule.reader({"F": value})) == expected  # the function chosen at load
    sure = rule.sure_reader  # the mapper's model-free path: no check of an answer it is sure of
    assert (sure is None) == (default == 5)  # a default that is not plain text is checked
    answer = _outcome(lambda: sure({"F": value}, unsure)) if sure is not None else ("value", UNSURE)
    if answer != ("value", UNSURE):
        assert answer == expected
        assert answer[0] == "problem" or answer[1] is None or as_text(answer[1]) == answer[1]


plain_texts = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=30).filter(str.strip)


@settings(max_examples=500, deadline=None)
@given(st.one_of(plain_texts, st.sampled_from(["(415) 555-0134", "+44 20 7946 0958", "Lovelace, Ada", " , "])))
def test_a_built_in_transform_of_plain_text_gives_plain_text(value: str) -> None:
    """What lets a rule of built-in transforms check only its source value (`rules._built_in`):
    printable ASCII that is not blank in, the same kind of text or None out (or a ValueProblem)."""
    for name in TRANSFORMS:
        try:
            result = (e164("US") if name == "e164" else plain(name))(value)
        except ValueProblem:
            continue
        assert result is None or (result.isascii() and result.isprintable() and result.strip()), (name, result)


@settings(max_examples=300, deadline=None)
@given(values, values)
def test_a_template_joins_as_text_of_its_fields(first: Any, last: Any) -> None:
    rule, problems = compile_field("name", {"template": "{First} {Last}"}, "m", _no_hooks)
    assert rule is not None, problems

    def by_the_rules() -> str | None:
        texts = []
        for name, value in (("First", first), ("Last", last)):
            try:
                texts.append(as_text(value))
            except ValueProblem as exc:
                raise ValueProblem(f"template field `{name}` {exc}") from None
        if texts == [None, None]:
            return None
        return f"{texts[0] or ''} {texts[1] or ''}".strip()

    assert _outcome(lambda: rule.value({"First": first, "Last": last})) == _outcome(by_the_rules)


def _no_hooks(ref: str) -> Any:
    raise ValueError("no hooks here")


TEMPLATES = ["{A} {B}", "{A}", "{A} / 100% {B} ({C})", "{{x}} {A}-{A}", "\u00e9 {A}", "{A}{B}{C}", " {A}\t{B} "]
template_values = st.one_of(
    values, st.sampled_from(["Ada", " ", "", "  Lovelace ", "%s", "{B}", "K\u00f6nig", "a\tb", "x" * 40])
)


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(TEMPLATES), st.fixed_dictionaries({}, optional=dict.fromkeys("ABC", template_values)))
def test_a_template_is_the_join_of_its_parts(template: str, data: dict[str, Any]) -> None:
    """Each field `as_text` of its value, the literals between, the whole stripped; absent when no
    field has a value: what the compiled form (one join, one check of the whole) must answer too."""
    rule, problems = compile_field("name", {"template": template}, "m", _no_hooks)
    assert rule is not None, problems

    def by_the_rules() -> str | None:
        out, found = [], False
        for literal, name, _, _ in string.Formatter().parse(template):
            out.append(literal)
            if name:
                try:
                    text = as_text(data.get(name))
                except ValueProblem as exc:
                    raise ValueProblem(f"template field `{name}` {exc}") from None
                if text is not None:
                    out.append(text)
                    found = True
        return "".join(out).strip() if found else None

    expected = _outcome(by_the_rules)
    assert _outcome(lambda: rule.value(data)) == expected
    sure = rule.sure_reader  # the render, sure of its own answer: plain text
    assert sure is not None
    answer = sure(data, unsure)
    if answer is not UNSURE:
        assert ("value", answer) == expected
        assert as_text(answer) == answer
