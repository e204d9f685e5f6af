"""The plain-address shortcut of the email check may only skip the validator for addresses the
validator accepts: a wrong shortcut would send the API an email it then refuses (a 400 on a whole
batch) instead of rejecting the record with its reason."""

from __future__ import annotations

import email_validator
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.api.models import _PLAIN_EMAIL, _SPECIAL_USE, PersonInput, _is_plain_email


def validator_accepts(value: str) -> bool:
    try:
        email_validator.validate_email(
            value, check_deliverability=False, globally_deliverable=False, test_environment=True
        )
    except email_validator.EmailNotValidError:
        return False
    return True


def test_the_shortcut_refuses_the_validators_special_use_names_but_test() -> None:
    assert frozenset(email_validator.SPECIAL_USE_DOMAIN_NAMES) - {"test"} == _SPECIAL_USE


@settings(max_examples=400)
@given(
    st.from_regex(_PLAIN_EMAIL, fullmatch=True)
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
