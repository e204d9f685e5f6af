"""The plain-address shortcut of the email check may only skip the validator for addresses the
validator accepts: a wrong shortcut would send the API an email it then refuses (a 400 on a whole
batch) instead of rejecting the record with its reason."""

from __future__ import annotations

import re

import email_validator
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.api.models import _SPECIAL_USE, PersonInput, _is_plain_email, plain_passes


def validator_accepts(value: str) -> bool:
    try:
        email_validator.validate_email(
            value, check_deliverability=False, globally_deliverable=False, test_environment=True
        )
    except email_validator.EmailNotValidError:
        return False
    return True


# The shortcut as it was spelled before the ninth session: a match of the address's shape, then the
# local part's length, "--" in the domain and the special-use names tested in Python. The one pattern
# that replaced it must answer the same for every text.
_SHAPE = re.compile(
    r"[A-Za-z0-9_%+-]{1,64}(?:\.[A-Za-z0-9_%+-]{1,64})*"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+([A-Za-z]{2,63})"
)


def stepwise(value: str) -> bool:
    match = _SHAPE.fullmatch(value) if len(value) <= 128 else None
    if match is None:
        return False
    at = value.index("@")
    return at <= 64 and "--" not in value[at:] and match.group(1).lower() not in _SPECIAL_USE


_PIECES = ["a", "Z", "0", "-", "--", ".", "@", "_", "%", "+", " ", "\n", "é", "\u212a", "x" * 30, "x" * 61]
_TLDS = ["com", "test", "TEST", "local", "LocalHost", "onion", "arpa", "invalid", "localx", "io", "c", "123", "\u212aa"]


pieces = st.lists(st.sampled_from(_PIECES), max_size=6).map("".join)


@settings(max_examples=2000)
@given(
    st.from_regex(_SHAPE, fullmatch=True)
    | st.emails()
    | st.builds("{}@{}.{}".format, pieces, pieces, st.sampled_from(_TLDS))
    | st.lists(st.sampled_from(_PIECES), max_size=12).map("".join)
    | st.text(max_size=140)
)
def test_the_one_pattern_answers_as_the_stepwise_checks(value: str) -> None:
    assert _is_plain_email(value) == stepwise(value), value
    assert plain_passes({"name": "A", "email": value}) == stepwise(value), value  # its own inline copy


@pytest.mark.parametrize(
    "value",
    [
        *("x" * 64 + "@e.com", "x" * 65 + "@e.com", "a--b@c.com", "a@b--c.com", "a@b.c--d.com", "a@b.LOCAL"),
        *("a@b.localx", "a@b.arpa.com", "a@" + "b" * 63 + ".com", "a@" + "b" * 64 + ".com", "a@b.co\n"),
        "a" * 60 + "@" + "b" * 60 + ".co",
    ],
)
def test_the_one_pattern_at_the_edges(value: str) -> None:
    assert _is_plain_email(value) == stepwise(value), value
    assert plain_passes({"name": "A", "email": value}) == stepwise(value), value


def test_the_shortcut_refuses_the_validators_special_use_names_but_test() -> None:
    assert frozenset(email_validator.SPECIAL_USE_DOMAIN_NAMES) - {"test"} == _SPECIAL_USE


@settings(max_examples=400)
@given(
    st.from_regex(_SHAPE, fullmatch=True)
    | st.emails()
    | st.builds(
        "{}@{}.{}".format,
        st.text("ab.-", max_size=5),
        st.text("ab.-", max_size=5),
        st.sampled_from(["test", "TEST", "local", "Localhost", "onion", "arpa", "invalid", "test.local", "local.test"]),
    )
)
def test_every_address_the_shortcut_passes_is_one_the_validator_accepts(value: str) -> None:
    if _is_plain_email(value):
        assert validator_accepts(value), value


@pytest.mark.parametrize(
    "value", ["ada@example.com", "Ada.Lovelace+crm@Mail.Example.ORG", "a_b%c-d@x1.io", "ada@example.test", "a@b.TEST"]
)
def test_ordinary_addresses_take_the_shortcut(value: str) -> None:
    assert _is_plain_email(value)
    assert PersonInput(name="Ada", email=value).email == value


@pytest.mark.parametrize(
    "value",
    [
        "a@b.local",
        "a@b.LOCALHOST",
        "a@b.onion",  # reserved names
        "a@ab--cd.com",
        "a@xn--abc.com",  # "--": IDNA rules
        "a@b.123",  # numeric top-level label
        "x" * 65 + "@example.com",  # local part beyond 64
        "ada@exämple.com",
        '"a b"@example.com',  # unicode, quoting
    ],
)
def test_anything_else_is_left_to_the_validator(value: str) -> None:
    assert not _is_plain_email(value)
    accepted = validator_accepts(value)
    if accepted:
        assert PersonInput(name="Ada", email=value).email == value
    else:
        with pytest.raises(ValueError, match="not a valid email address"):
            PersonInput(name="Ada", email=value)
