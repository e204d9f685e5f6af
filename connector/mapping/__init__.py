"""The mapper (design 6): a source record -> a valid PersonInput, or a Rejection naming every problem.

`Mapping.from_config` checks the whole `[sources.mapping]` table when the config loads; `map` never
raises, whatever the record holds (the property tests in tests/mapping prove it).

Each key is a person field (or `custom_fields.<name>`), and its value is a source field name or a
table with exactly one of `field`, `template` ("{First} {Last}") or `constant`, plus optionally
`transform` (one or a list, applied in order: strip, lower, upper, e164 with `region`, first_name,
last_name, or "package.module:function") and `default` (used when the value is absent). Empty or
blank text is absent. A top-level `hook = "package.module:function"` gets (record, person fields)
after the rules and returns the person fields; an exception it raises rejects the record.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ..api.models import PersonInput, explain
from ..plugins import import_object
from ..problems import ConfigProblem
from .rules import TEXT_FIELDS, FieldRule, compile_field
from .values import ValueProblem, as_json, as_text

Hook = Callable[[dict[str, Any], dict[str, Any]], Any]


@dataclass(frozen=True)
class Rejection:
    reasons: list[str]  # each names the field it came from


def _load_callable(ref: str) -> Callable[..., Any]:
    """`package.module:function`; raises ValueError with a readable reason."""
    if ":" not in ref:
        raise ValueError(f"{ref!r} is not of the form \"package.module:function\"")
    try:
        fn = import_object(ref)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load {ref!r}: {exc}") from None
    if not callable(fn):
        raise ValueError(f"{ref!r} is not callable")
    return fn


class Mapping:
    """The field rules of one source, and an optional whole-record hook run after them."""

    def __init__(self, rules: list[FieldRule], hook: tuple[str, Hook] | None, version: str) -> None:
        self.rules, self.hook, self.version = rules, hook, version

    @classmethod
    def from_config(cls, table: dict[str, Any], *, where: str) -> Mapping:
        """Raises ConfigProblem listing every problem, each naming `where.key`."""
        problems: list[str] = []
        rules: list[FieldRule] = []
        hook = None

        def add(target: str, spec: Any) -> None:
            rule, found = compile_field(target, spec, where, _load_callable)
            problems.extend(found)
            if rule is not None:
                rules.append(rule)

        for key, spec in table.items():
            if key == "hook":
                if not isinstance(spec, str):
                    problems.append(f"{where}.hook: must be \"package.module:function\"")
                    continue
                try:
                    hook = (spec, _load_callable(spec))
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
                problems.append(f"{where}.{key}: not a person field (one of: {', '.join(TEXT_FIELDS)}, custom_fields, hook)")
        if hook is None and not problems:
            targets = {r.target for r in rules}
            for pair in (("name", "first_name"), ("email", "phone")):
                if not targets & set(pair):
                    problems.append(f"{where}: maps neither `{pair[0]}` nor `{pair[1]}`, so every record would be rejected")
        if problems:
            raise ConfigProblem(problems)
        digest = hashlib.sha256(json.dumps(table, sort_keys=True, default=str).encode()).hexdigest()
        return cls(rules, hook, digest[:12])

    def columns(self) -> dict[str, tuple[str, ...]]:
        """Mapping field -> the source fields it reads (a hook may read more: it is not known here)."""
        return {rule.target: rule.columns for rule in self.rules if rule.columns}

    def map(self, data: dict[str, Any]) -> PersonInput | Rejection:
        """Never raises: a problem with any field becomes a reason naming that field."""
        reasons: list[str] = []
        person: dict[str, Any] = {}
        origins: dict[str, str] = {}
        for rule in self.rules:
            try:
                value = rule.value(data)
            except ValueProblem as exc:
                reasons.append(f"{rule.target} (from {rule.origin}): {exc}")
                continue
            origins[rule.target] = rule.origin
            if rule.target.startswith("custom_fields."):
                person.setdefault("custom_fields", {})[rule.target.removeprefix("custom_fields.")] = value
            else:
                person[rule.target] = value
        if self.hook is not None:
            ref, fn = self.hook
            try:
                person = fn(dict(data), person)
            except Exception as exc:
                return Rejection([*reasons, f"hook {ref} failed: {type(exc).__name__}: {exc}"])
            if not isinstance(person, dict):
                return Rejection([*reasons, f"hook {ref} returned {type(person).__name__}, not a dict of person fields"])
        clean = _clean(person, origins, reasons)
        try:
            valid = PersonInput.model_validate(clean)
        except ValidationError as exc:
            return Rejection(reasons + _explained(exc, origins))
        return Rejection(reasons) if reasons else valid


def _origin(origins: dict[str, str], target: str) -> str:
    return f" (from {origins[target]})" if target in origins else ""


def _clean(person: dict[str, Any], origins: dict[str, str], reasons: list[str]) -> dict[str, Any]:
    """Coerce every value to what the API takes; absent ones are dropped, bad ones become reasons."""
    clean: dict[str, Any] = {}
    for key, value in person.items():
        if key == "custom_fields" and isinstance(value, dict):
            fields = {}
            for name, item in value.items():
                target = f"custom_fields.{name}"
                try:
                    item = as_json(item)
                except ValueProblem as exc:
                    reasons.append(f"{target}{_origin(origins, target)}: {exc}")
                    continue
                if item is not None:
                    fields[str(name)] = item
            if fields:
                clean[key] = fields
            continue
        try:
            value = as_text(value) if key in TEXT_FIELDS else value
        except ValueProblem as exc:
            reasons.append(f"{key}{_origin(origins, key)}: {exc}")
            continue
        if value is not None:
            clean[str(key)] = value
    return clean


def _explained(exc: ValidationError, origins: dict[str, str]) -> list[str]:
    """The API model's messages, each with the source field its value came from."""
    out = []
    for err, message in zip(exc.errors(include_url=False), explain(exc), strict=True):
        target = ".".join(str(p) for p in err["loc"][:2]) if err["loc"][:1] == ("custom_fields",) else (str(err["loc"][0]) if err["loc"] else "")
        out.append(message + _origin(origins, target))
    return out


__all__ = ["Mapping", "Rejection"]
