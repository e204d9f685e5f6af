"""The mapper (design 6): a source record -> a valid PersonInput, or a Rejection naming every problem.

`Mapping.from_config` checks the whole `[sources.mapping]` table when the config loads; `map` never
raises, whatever the record holds (the property tests in tests/mapping prove it).

Each key is a person field (or `custom_fields.<name>`), and its value is a source field name or a
table with exactly one of `field`, `template` ("{First} {Last}") or `constant`, plus optionally
`transform` (one or a list, applied in order: strip, lower, upper, e164 with `region`, first_name,
last_name, or "package.module:function"), `default` (used when the value is absent) and
`on_error`: "reject" (the default) rejects the record when the field's value cannot be used,
"drop" leaves the field out and notes why. Text loses its control characters, and blank or
invisible text is absent (values.py states both rules). A top-level
`hook = "package.module:function"` gets (record, person fields) after the rules and returns the
person fields; an exception it raises rejects the record.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..api.encoding import encode_json, encode_person, encode_texts
from ..api.models import (
    PersonInput,
    explain,
    is_readable,
    plain_passes,
    plain_person,
    plain_shaped,
)
from ..plugins import import_object
from ..problems import ConfigProblem
from . import transforms as tf
from .rules import TEXT_FIELDS, UNSURE, FieldRule, compile_field, unsure
from .values import ValueProblem, as_json, as_text

Hook = Callable[[dict[str, Any], dict[str, Any]], Any]
_CUSTOM = "custom_fields."
_TEXT = frozenset(TEXT_FIELDS)


@dataclass(frozen=True)
class Rejection:
    reasons: list[str]  # each names the field it came from


def _load_callable(ref: str, search: Path | None = None) -> Callable[..., Any]:
    """`package.module:function` (installed, or in `search`: the config's folder); raises ValueError
    with a readable reason."""
    if ":" not in ref:
        raise ValueError(f'{ref!r} is not of the form "package.module:function"')
    try:
        fn = import_object(ref, search)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load {ref!r}: {exc}") from None
    if not callable(fn):
        raise ValueError(f"{ref!r} is not callable")
    return fn


class Mapping:
    """The field rules of one source, and an optional whole-record hook run after them."""

    def __init__(self, rules: list[FieldRule], hook: tuple[str, Hook] | None, version: str) -> None:
        self.rules, self.hook, self.version = rules, hook, version
        self.targets = {rule.target: rule for rule in rules}
        # Per rule, what _cleaned needs of it, worked out once: its reader, the person field it
        # fills, and the custom field's name (None for a person field).
        self._steps = tuple(
            (rule.reader, rule.target, rule.target.removeprefix(_CUSTOM) if rule.target.startswith(_CUSTOM) else None)
            for rule in rules
        )
        # Without a hook, `_clean` makes the shape `plain_shaped` takes (as_text gives exact, non-empty,
        # readable text; the custom fields' names are the config's): unless a name is not readable.
        self._shaped = hook is None and all(is_readable(custom) for _, _, custom in self._steps if custom is not None)
        # `_direct`'s steps: the person fields in the payload's order (the model's), then the custom
        # fields in the config's; only where reading a record twice is unseen (no transform of the
        # user's, which might count its calls), as `_direct` gives up on a record with any problem.
        # A person field's rule may have a sure reader (`FieldRule.sure_reader`), whose answer needs no check.
        order = list(PersonInput.model_fields)
        texts = sorted((rule for rule in rules if rule.target in _TEXT), key=lambda rule: order.index(rule.target))
        self._direct_steps = (
            tuple(
                (rule.plain_field, rule.reader, rule.target, rule.target != "notes", rule.sure_reader) for rule in texts
            ),
            tuple(
                (rule.plain_field, rule.reader, rule.target.removeprefix(_CUSTOM))
                for rule in rules
                if rule.target.startswith(_CUSTOM)
            ),
        )
        self._direct_ok = self._shaped and not any(tf.is_hooked(t) for rule in rules for t in rule.transforms)

    @classmethod
    def from_config(cls, table: dict[str, Any], *, where: str, search: Path | None = None) -> Mapping:
        """Raises ConfigProblem listing every problem, each naming `where.key`. Python transforms and
        the hook are imported from an installed package or from `search` (the config's folder)."""
        problems: list[str] = []
        rules: list[FieldRule] = []
        hook = None
        load = functools.partial(_load_callable, search=search)

        def add(target: str, spec: Any) -> None:
            rule, found = compile_field(target, spec, where, load)
            problems.extend(found)
            if rule is not None:
                rules.append(rule)

        for key, spec in table.items():
            if key == "hook":
                if not isinstance(spec, str):
                    problems.append(f'{where}.hook: must be "package.module:function"')
                    continue
                try:
                    hook = (spec, load(spec))
                except ValueError as exc:
                    problems.append(f"{where}.hook: {exc}")
            elif key == "custom_fields":
                if isinstance(spec, dict):
                    for name, field_spec in spec.items():
                        add(f"custom_fields.{name}", field_spec)
                else:
                    problems.append(f"{where}.custom_fields: must be a table of custom field names")
            elif key in TEXT_FIELDS:
                add(key, spec)
            else:
                problems.append(
                    f"{where}.{key}: not a person field (one of: {', '.join(TEXT_FIELDS)}, custom_fields, hook)"
                )
        if hook is None and not problems:
            targets = {r.target for r in rules}
            for pair in (("name", "first_name"), ("email", "phone")):
                if not targets & set(pair):
                    problems.append(
                        f"{where}: maps neither `{pair[0]}` nor `{pair[1]}`, so every record would be rejected"
                    )
        if problems:
            raise ConfigProblem(problems)
        digest = hashlib.sha256(json.dumps(table, sort_keys=True, default=str).encode()).hexdigest()
        return cls(rules, hook, digest[:12])

    def columns(self) -> dict[str, tuple[str, ...]]:
        """Mapping field -> the source fields it reads (a hook may read more: it is not known here)."""
        return {rule.target: rule.columns for rule in self.rules if rule.columns}

    def map(self, data: dict[str, Any]) -> PersonInput | Rejection:
        """`map_noting` without the notes."""
        return self.map_noting(data)[0]

    def map_noting(self, data: dict[str, Any]) -> tuple[PersonInput | Rejection, tuple[str, ...]]:
        """The person or the rejection, and the notes on fields dropped by `on_error = "drop"`
        (kept beside the payload). Never raises: a problem with any field becomes a reason naming
        that field; a rejection's reasons include the drops, and its notes are empty."""
        return _judged(*self._cleaned(data))

    def payload_noting(self, data: dict[str, Any]) -> tuple[dict[str, Any] | Rejection, tuple[str, ...]]:
        """`map_noting` with the person as its payload's fields (`PersonInput.to_json_dict()`), what a
        sync stores: a record of the common shape is not made a model first (`plain_person`, proven
        to give the same fields); any other is judged by `map_noting`'s own steps."""
        payload, notes, _ = self._payload(data)
        return payload, notes

    def encoded_noting(self, data: dict[str, Any]) -> tuple[bytes | Rejection, tuple[str, ...]]:
        """`payload_noting` with the payload as `encode_json`'s bytes, what a sync stores. A payload
        the model-free path made is of `plain_person`'s shape, so `encode_person` checks only its
        custom fields for the encoder's sake, and `encode_texts` not even those when `_direct` found
        them all exact str (the same bytes, proven in tests/api/test_encode_json.py)."""
        if self._direct_ok and (direct := self._direct(data)) is not None:  # `_payload`'s, without its call
            return (encode_texts if direct[1] else encode_person)(direct[0]), ()
        payload, notes, encode = self._judged_payload(data)
        if isinstance(payload, Rejection):
            return payload, notes
        return encode(payload), notes

    def _payload(
        self, data: dict[str, Any]
    ) -> tuple[dict[str, Any] | Rejection, tuple[str, ...], Callable[[dict[str, Any]], bytes]]:
        """`payload_noting`'s answer, and the encoder its bytes take: `encode_texts` where `_direct`
        made a payload of str alone, `encode_person` where the model-free path made it, else `encode_json`."""
        if self._direct_ok and (direct := self._direct(data)) is not None:
            payload, texts = direct
            return payload, (), encode_texts if texts else encode_person
        return self._judged_payload(data)

    def _judged_payload(
        self, data: dict[str, Any]
    ) -> tuple[dict[str, Any] | Rejection, tuple[str, ...], Callable[[dict[str, Any]], bytes]]:
        """`_payload` for a record `_direct` did not take: the two-pass steps."""
        clean, problems = self._cleaned(data)
        if not isinstance(clean, Rejection) and not problems.reasons:
            plain = plain_shaped(clean) if self._shaped else plain_person(clean)
            if plain is not None:
                return plain, tuple(problems.notes), encode_person
        result, notes = _judged(clean, problems)
        return (result.to_json_dict() if isinstance(result, PersonInput) else result), notes, encode_json

    def _direct(self, data: dict[str, Any]) -> tuple[dict[str, Any], bool] | None:
        """`_cleaned` and `plain_shaped` in one pass for a record without a problem, the payload built
        in its own order: each value read and cleaned as `_clean` cleans it, without the person dict
        between, the problems' bookkeeping or a reordering. None at the first problem or when the
        payload needs the model's judgement: the two-pass steps then say why, in their order. With the
        payload, whether its values are all exact str (the custom fields' too): `encode_texts` then."""
        payload: dict[str, Any] = {}
        texts, customs = self._direct_steps
        only_str = True
        # A plain field rule's value is looked up here, without a call of its `get`; as_text's first case
        # (and as_json's, the same for text) inline: a call and a keyword per field saved.
        try:
            for field, value_of, target, one_line, sure in texts:
                if sure is not None:  # its answer needs no check, unless it is UNSURE
                    value = sure(data, unsure)
                    if value is not UNSURE:
                        if value is not None:
                            payload[target] = value
                        continue
                    value = value_of(data)
                elif field is None:
                    value = value_of(data)
                else:
                    value = data.get(field)
                if type(value) is str and value.isascii() and value.isprintable():
                    if value.strip():
                        payload[target] = value
                elif (value := as_text(value, one_line=one_line)) is not None:
                    payload[target] = value
            if customs:
                fields = {}
                for field, value_of, name in customs:
                    value = value_of(data) if field is None else data.get(field)
                    if type(value) is str and value.isascii() and value.isprintable():
                        if value.strip():
                            fields[name] = value
                    elif (value := as_json(value)) is not None:
                        fields[name] = value
                        only_str = only_str and type(value) is str
                if fields:
                    payload["custom_fields"] = fields
        except ValueProblem:
            return None
        return (payload, only_str) if plain_passes(payload) else None

    def _cleaned(self, data: dict[str, Any]) -> tuple[dict[str, Any] | Rejection, _Problems]:
        """The rules and the hook applied and the values coerced (`_clean`), with the problems so far;
        a Rejection when the hook failed."""
        problems = _Problems(self.targets)
        person: dict[str, Any] = {}
        for value_of, target, custom in self._steps:
            try:
                value = value_of(data)
            except ValueProblem as exc:
                problems.add(target, str(exc))
                continue
            if custom is None:
                person[target] = value
            else:
                person.setdefault("custom_fields", {})[custom] = value
        if self.hook is not None:
            ref, fn = self.hook
            try:
                person = fn(dict(data), person)
            except Exception as exc:
                return problems.rejection(f"hook {ref} failed: {type(exc).__name__}: {exc}"), problems
            if not isinstance(person, dict):
                return problems.rejection(
                    f"hook {ref} returned {type(person).__name__}, not a dict of person fields"
                ), problems
        return _clean(person, problems), problems


def _judged(clean: dict[str, Any] | Rejection, problems: _Problems) -> tuple[PersonInput | Rejection, tuple[str, ...]]:
    """The person the model makes of `clean`, or the rejection with every reason so far."""
    if isinstance(clean, Rejection):
        return clean, ()
    valid = _validated(clean, problems)
    if valid is None or problems.reasons:
        return problems.rejection(), ()
    return valid, tuple(problems.notes)


class _Problems:
    """The reasons that reject a record and the notes on dropped fields, each naming its field.
    A plain class with slots: one is made per record."""

    __slots__ = ("notes", "reasons", "rules")

    def __init__(self, rules: dict[str, FieldRule]) -> None:
        self.rules = rules
        self.reasons: list[str] = []
        self.notes: list[str] = []

    def add(self, target: str, problem: str) -> None:
        rule = self.rules.get(target)
        where = f"{target} (from {rule.origin})" if rule else target
        if rule is not None and rule.drop:
            self.notes.append(f"{where}: dropped: {problem}")
        else:
            self.reasons.append(f"{where}: {problem}")

    def drops(self, target: str) -> bool:
        rule = self.rules.get(target)
        return rule is not None and rule.drop

    def refused(self, target: str, message: str) -> None:
        """A refusal by the API model, whose message names the field already."""
        rule = self.rules.get(target)
        self.reasons.append(f"{message} (from {rule.origin})" if rule else message)

    def rejection(self, *more: str) -> Rejection:
        return Rejection([*self.notes, *self.reasons, *more])


def _clean(person: dict[str, Any], problems: _Problems) -> dict[str, Any]:
    """Coerce every value to what the API takes; absent ones are left out, bad ones are problems."""
    clean: dict[str, Any] = {}
    for key, value in person.items():
        if key == "custom_fields" and isinstance(value, dict):
            fields = {}
            for name, item in value.items():
                try:
                    item = as_json(item)
                except ValueProblem as exc:
                    problems.add(f"custom_fields.{name}", str(exc))
                    continue
                if item is not None:
                    fields[str(name)] = item
            if fields:
                clean[key] = fields
            continue
        try:
            value = as_text(value, one_line=key != "notes") if key in _TEXT else value
        except ValueProblem as exc:
            problems.add(str(key), str(exc))
            continue
        if value is not None:
            clean[str(key)] = value
    return clean


def _validated(clean: dict[str, Any], problems: _Problems) -> PersonInput | None:
    """The API model's verdict; a field it refuses whose rule drops is left out and the rest checked
    again (dropping can break rule A or B, which rejects), any other refusal rejects."""
    while True:
        try:
            return PersonInput.model_validate(clean)
        except ValidationError as exc:
            refused = list(zip(_targets(exc), explain(exc), strict=True))
        rejected = False
        for target, message in refused:
            if problems.drops(target) and _pop(clean, target):
                problems.add(target, message)
            else:
                problems.refused(target, message)
                rejected = True
        if rejected:
            return None


def _targets(exc: ValidationError) -> list[str]:
    """The mapping field each of the API model's errors is about ("" for the whole person)."""
    return [
        ".".join(str(p) for p in err["loc"][:2])
        if err["loc"][:1] == ("custom_fields",)
        else (str(err["loc"][0]) if err["loc"] else "")
        for err in exc.errors(include_url=False)
    ]


def _pop(clean: dict[str, Any], target: str) -> bool:
    """Leave the field out; False when it is not there to leave out."""
    if target in clean:
        del clean[target]
        return True
    fields = clean.get("custom_fields")
    name = target.removeprefix("custom_fields.")
    if name == target or not isinstance(fields, dict) or name not in fields:
        return False
    del fields[name]
    if not fields:
        del clean["custom_fields"]
    return True


__all__ = ["Mapping", "Rejection"]
