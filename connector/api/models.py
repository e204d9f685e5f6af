"""Pydantic models for every schema of the Capture API spec (sections 2 and 7).

Request models are strict (unknown properties are errors, as the API rejects them); response
models tolerate extra fields so that a server adding a field does not break delivery.
Each builds its validator at its first use (`defer_build`): a sync of plain contacts uses none of
them (`plain_person`, `_wire`'s own reading of an answer), and building them all cost some 4 ms of
every start-up; the first use builds the very validator the import did.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar
from uuid import UUID

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .encoding import encode_json

MAX_KEY_LENGTH = 512
MAX_BULK_PERSONS = 100


# The validator's own list (`email_validator.SPECIAL_USE_DOMAIN_NAMES`) less `test`: `_check_email`
# asks it with `test_environment`, which lets `.test` addresses through (sandboxes and demos use them),
# so the shortcut takes them too. Written out because email_validator compiles its regexes at import
# (some 20 ms of every sync's start-up) and a contact list of plain addresses never needs it;
# tests/api/test_email_fast_path.py checks the two lists agree.
_SPECIAL_USE = frozenset({"arpa", "invalid", "local", "localhost", "onion"})

# Plain ASCII addresses (dot-atom local part of at most 64 characters, LDH labels without "--", an
# alphabetic top-level label that is not a special-use name) are a subset of what email_validator
# accepts; they are most of any contact list, and recognising them takes about a microsecond where the
# validator's IDNA and Unicode checks take tens per address. Everything else, including every address
# the validator would refuse, goes to the validator (tests/api/test_email_fast_path.py holds the subset
# property). One pattern holds every condition, the length's, the "--"'s and the top-level label's as
# lookaheads: a third fewer instructions than the match followed by the same tests in Python (the
# test file holds the two equal).
# Possessive repeats, and a label as LDH characters neither starting nor ending with "-": nothing is
# given back and tried again (a label and the top-level one are told apart by the dot).
_PLAIN_EMAIL = re.compile(
    r"(?=[^@]{1,64}+@)[A-Za-z0-9_%+-]{1,64}+(?:\.[A-Za-z0-9_%+-]{1,64}+)*+"
    r"@(?!.*--)(?:(?!-)[A-Za-z0-9-]{1,63}+(?<!-)\.)++"
    rf"(?!(?i:{'|'.join(sorted(_SPECIAL_USE))})\Z)[A-Za-z]{{2,63}}+"
)
_PLAIN_MAX_LENGTH = 128  # well under the validator's 64 (local part) and 254 (address)


def _is_plain_email(value: str) -> bool:
    return len(value) <= _PLAIN_MAX_LENGTH and _PLAIN_EMAIL.fullmatch(value) is not None


def _check_email(value: str) -> str:
    """Validate the syntax only and keep the caller's spelling: the CRM owns normalisation.

    `test_environment` lets `.test` addresses through, which sandboxes and demos use.
    """
    if _is_plain_email(value):
        return value
    import email_validator  # at the first address that is not plain: see _SPECIAL_USE

    try:
        email_validator.validate_email(
            value, check_deliverability=False, globally_deliverable=False, test_environment=True
        )
    except email_validator.EmailNotValidError as exc:
        raise PydanticCustomError("email", "not a valid email address: {reason}", {"reason": str(exc)}) from exc
    return value


Email = Annotated[str, AfterValidator(_check_email)]
NonEmpty = Annotated[str, Field(min_length=1)]

PERSON_FIELDS = (
    "name",
    "first_name",
    "last_name",
    "email",
    "phone",
    "company",
    "job_title",
    "notes",
    "custom_fields",
)


class PersonInput(BaseModel):
    """Body of POST /person (spec 2.1)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    name: NonEmpty | None = None
    first_name: NonEmpty | None = None
    last_name: str | None = None
    email: Email | None = None
    phone: str | None = None
    company: str | None = None
    job_title: str | None = None
    notes: str | None = None
    custom_fields: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_nulls(cls, data: Any) -> Any:
        # The schema types these fields as strings: an explicit null is not "absent". A loop of
        # identity tests first: every record passes here, and hardly any holds a null.
        if isinstance(data, dict):
            for value in data.values():
                if value is None:
                    cls._refuse_nulls(data)
                    break
        return data

    @classmethod
    def _refuse_nulls(cls, data: dict[Any, Any]) -> None:
        nulls = [k for k, v in data.items() if v is None and k in cls.model_fields]
        if nulls:
            raise PydanticCustomError(
                "null_field",
                "{fields} must not be null (leave the field out instead)",
                {"fields": ", ".join(f"`{k}`" for k in nulls)},
            )

    @model_validator(mode="after")
    def _rules_a_and_b(self) -> PersonInput:
        problems = []
        if self.name is None and self.first_name is None:
            problems.append("needs `name` or `first_name`")
        if self.email is None and self.phone is None:
            problems.append("needs `email` or `phone`")
        if problems:
            raise PydanticCustomError("rules", "{problems}", {"problems": "; ".join(problems)})
        return self

    def to_json_dict(self) -> dict[str, Any]:
        # The fields are plain JSON values in declaration order, so this is model_dump(exclude_none=True)
        # at a fifth of its cost (a sync calls it once per record).
        return {k: v for k, v in self.__dict__.items() if v is not None}


_FIELD_ORDER = tuple(PersonInput.model_fields)  # to_json_dict's order: the payload's bytes depend on it
_TEXT_FIELDS = frozenset(_FIELD_ORDER) - {"custom_fields"}


def plain_person(data: dict[str, Any]) -> dict[str, Any] | None:
    """`PersonInput.model_validate(data).to_json_dict()` for the shape nearly every mapped record
    has, without building the model (its validation is half of what mapping a record costs): only
    the person's fields, each text an exact, non-empty str the model can read (no lone surrogate),
    custom fields a dict with exact str keys, an email the shortcut of `_check_email` passes, and
    rules A and B met. None for anything else, which the model then judges and says why about
    (tests/api/test_plain_person.py holds the equality over generated inputs)."""
    for key, value in data.items():
        if key == "custom_fields":
            if type(value) is not dict or not all(type(name) is str and is_readable(name) for name in value):
                return None
        elif key not in _TEXT_FIELDS or type(value) is not str or not value or not is_readable(value):
            return None
    return plain_shaped(data)


def plain_shaped(data: dict[str, Any]) -> dict[str, Any] | None:
    """`plain_person` for data already known to be of its shape (only the person's fields, each text
    an exact, non-empty, readable str; custom fields a dict with exact, readable str keys): what is
    left to check is the email's shortcut and rules A and B. The mapper's own cleaning makes such
    data when no hook reshapes it, and skips the per-field checks (a quarter of a record's mapping)."""
    return {key: data[key] for key in _FIELD_ORDER if key in data} if plain_passes(data) else None


def plain_passes(data: dict[str, Any]) -> bool:
    """`plain_shaped`'s checks alone, for data of its shape whose fields are in the model's order
    already (the mapper's model-free path makes them so): then `data` is the payload itself."""
    email = data.get("email")
    # `_is_plain_email` inline: a call per record saved
    if email is not None and (len(email) > _PLAIN_MAX_LENGTH or _PLAIN_EMAIL.fullmatch(email) is None):
        return False
    return ("name" in data or "first_name" in data) and ("email" in data or "phone" in data)


def is_readable(text: str) -> bool:
    """Whether pydantic-core reads it as text: UTF-8 holds no lone surrogate."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class BulkPersonInput(PersonInput):
    """Element of `persons` in POST /persons/bulk (spec 2.2)."""

    idempotency_key: Annotated[str, Field(max_length=MAX_KEY_LENGTH)] | None = None


class BulkBody(BaseModel):
    """Body of POST /persons/bulk (spec 4.3)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    persons: Annotated[list[BulkPersonInput], Field(min_length=1, max_length=MAX_BULK_PERSONS)]


class ClientInfo(BaseModel):
    """`data` of GET /info (spec 2.4)."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    client_name: str
    rate_limit: int
    default_lead_source: str | None = None
    has_custom_field_mapping: bool
    allowed_origins: list[str] | None = None


class PersonCaptureResult(BaseModel):
    """`data` of POST /person (spec 2.5)."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    person_id: UUID
    status: str | None = None
    action: str | None = None
    duplicate_detected: bool | None = None
    idempotent_replay: bool | None = None


class BulkCaptureResult(BaseModel):
    """`data` of POST /persons/bulk (spec 2.6): the objects' fields are not documented."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    successful: list[dict[str, Any]]
    duplicates: list[dict[str, Any]]
    failed: list[dict[str, Any]]


T = TypeVar("T")


class SuccessEnvelope(BaseModel, Generic[T]):
    """Every 2xx response (spec 2.3)."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    success: Literal[True]
    statusCode: int
    timestamp: datetime
    message: str | None = None
    data: T


class ErrorBody(BaseModel):
    """`error` of the error envelope (spec 7); servers may add properties."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    name: str
    message: str
    statusCode: int
    code: str | None = None
    retryable: bool | None = None
    isOperational: bool | None = None


class ErrorEnvelope(BaseModel):
    """Every non-2xx response (spec 7)."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    success: Literal[False]
    statusCode: int
    timestamp: datetime
    error: ErrorBody


def explain(exc: ValidationError) -> list[str]:
    """Turn a pydantic error into one short sentence per problem, naming the field."""
    messages = []
    for err in exc.errors(include_url=False):
        loc = [str(part) for part in err["loc"]]
        where = ".".join(loc)
        kind = err["type"]
        if kind == "extra_forbidden":
            messages.append(f"unknown field `{where}`")
        elif kind == "missing":
            messages.append(f"missing required field `{where}`")
        elif kind in ("rules", "null_field"):
            prefix = f"{where}: " if where else ""
            messages.append(prefix + err["msg"])
        elif kind == "email":
            messages.append(f"`{where}` is {err['msg']}")
        elif kind == "string_too_short":
            messages.append(f"`{where}` must not be empty")
        elif kind == "string_too_long":
            messages.append(f"`{where}` is longer than {err['ctx']['max_length']} characters")
        elif kind == "too_short":
            messages.append(f"`{where}` needs at least {err['ctx']['min_length']} item(s)")
        elif kind == "too_long":
            messages.append(f"`{where}` allows at most {err['ctx']['max_length']} items")
        elif kind == "string_type":
            messages.append(f"`{where}` must be a string")
        elif kind in ("dict_type", "model_type", "model_attributes_type"):
            messages.append(f"`{where}` must be an object" if where else "the body must be a JSON object")
        elif kind == "list_type":
            messages.append(f"`{where}` must be an array")
        else:
            messages.append(f"`{where}`: {err['msg']}" if where else err["msg"])
    return messages


def encode_bulk(persons: Sequence[BulkPersonInput | dict[str, Any]]) -> bytes:
    items: Iterable[dict[str, Any]] = (p.to_json_dict() if isinstance(p, PersonInput) else p for p in persons)
    return encode_json({"persons": list(items)})
