"""Compiling the `[sources.mapping]` table (design 6) into field rules, collecting every problem."""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, cast

import phonenumbers
from pydantic import BaseModel, ConfigDict, ValidationError

from ..api.models import PERSON_FIELDS
from ..problems import problems_from
from . import transforms as tf
from .values import ValueProblem, as_text

Scalar = str | int | float | bool


class FieldSpec(BaseModel):
    """A field written as a table: a source (`field`, `template` or `constant`) and its treatment."""

    model_config = ConfigDict(extra="forbid")

    field: str | None = None
    template: str | None = None
    constant: Scalar | None = None
    transform: str | list[str] = []
    region: str | None = None
    default: Scalar | None = None
    on_error: Literal["reject", "drop"] = "reject"


class _Unsure:
    """`UNSURE`'s type: a sure reader's answer where the checked path must answer."""


UNSURE = _Unsure()
SureReader = Callable[[dict[str, Any], Callable[[Any], Any]], Any]


def unsure(value: Any) -> _Unsure:
    """What a sure reader is given in place of `finish`."""
    return UNSURE


@dataclass(frozen=True)
class FieldRule:
    target: str  # "email", or "custom_fields.plan"
    origin: str  # where the value comes from, for reasons: "`Email`", "the template", "the constant"
    get: Callable[[dict[str, Any]], Any]
    transforms: tuple[tf.Transform, ...] = ()
    default: Scalar | None = None
    columns: tuple[str, ...] = ()  # the source fields it reads: checked against what a source has
    drop: bool = False  # on_error = "drop": a value that cannot be used is left out, not the record
    field: str | None = None  # the one source field a `field` rule reads (`get` is data.get(field))
    sure_get: SureReader | None = None  # `get` as a sure reader (a template's), for `sure_reader`

    def value(self, data: dict[str, Any]) -> Any:
        """The mapped value (None: absent); raises ValueProblem."""
        return self.finish(self.get(data))

    def finish(self, value: Any) -> Any:
        """`value` for the source value `value`: as_text of it and of each transform's result."""
        if self.transforms:
            # as_text on the value and on each transform's result, its first case (plain ASCII text,
            # nearly every value: a built-in transform of it gives it again) inline, without a call
            if type(value) is str and value.isascii() and value.isprintable():
                value = value if value.strip() else None
            else:
                value = as_text(value)
            for transform in self.transforms:
                if value is None:
                    break
                value = transform(value)
                if type(value) is str and value.isascii() and value.isprintable():
                    value = value if value.strip() else None
                else:
                    value = as_text(value)
        elif self.default is not None and isinstance(value, str):
            value = as_text(value)  # blank or invisible text is absent, so the default applies to it too
        return self.default if value is None else value

    @cached_property
    def reader(self) -> Callable[[dict[str, Any]], Any]:
        """What the mapper calls per record, chosen once: `get` itself where `value` would return just
        what `get` does (no transform, no default); for built-in transforms, `_built_in`'s function;
        else `value`."""
        if self.plain:
            return self.get
        if self.transforms and not any(tf.is_hooked(t) for t in self.transforms):
            return _built_in(self)
        return self.value

    @cached_property
    def sure_reader(self) -> SureReader | None:
        """`reader` where it can say that its answer is plain text (printable ASCII, not blank, what
        `as_text` gives again) or None, for a mapper that would check it otherwise: `_built_in`'s
        function, given `unsure` (it gives the `UNSURE` sentinel where the source value is not plain
        text and `finish` would answer), when the default is None or plain text too; a plain template
        rule's render (`sure_get`). None for any other rule."""
        if self.plain:
            return self.sure_get
        default = self.default
        if not self.transforms or any(tf.is_hooked(t) for t in self.transforms):
            return None
        if default is not None and not (type(default) is str and _is_plain_text(default)):
            return None
        return cast(SureReader, self.reader)

    @property
    def plain(self) -> bool:
        """Whether `value` returns just what `get` does: no transform, no default."""
        return not self.transforms and self.default is None

    @property
    def plain_field(self) -> str | None:
        """The source field whose value is the mapped value as it is (a plain `field` rule), for a mapper
        that looks it up itself rather than call `get`; None for any other rule."""
        return self.field if self.plain else None


def _is_plain_text(value: str) -> bool:
    return value.isascii() and value.isprintable() and bool(value.strip())


def _built_in(rule: FieldRule) -> Callable[..., Any]:
    """`rule.value` for a rule whose transforms are all built in. Each of them gives plain text
    (printable ASCII, not blank) or None for plain text (tests/mapping/test_rule_values.py), so on
    plain text `as_text` of every result would give it again: only the source value is checked, and
    any other value takes `finish`'s steps (or `odd`'s: `FieldRule.sure_reader`). The source field is
    looked up here, without `get`'s call."""
    field, get, finish, default = rule.field, rule.get, rule.finish, rule.default
    transforms = rule.transforms

    def read(data: dict[str, Any], odd: Callable[[Any], Any] = finish) -> Any:
        value = get(data) if field is None else data.get(field)
        if type(value) is not str or not value.isascii() or not value.isprintable():
            return odd(value)
        if not value.strip():
            return default
        for transform in transforms:
            value = transform(value)
            if value is None:
                return default
        return value

    return read


def _template(text: str) -> tuple[Callable[[dict[str, Any]], Any], list[str], tuple[str, ...]]:
    """A `{Field} {Other}` renderer looking fields up by their whole name (spaces and dots allowed)."""
    try:
        pieces = list(string.Formatter().parse(text))
    except ValueError as exc:
        return _nothing, [f"template: not a valid template ({exc})"], ()
    problems = [
        f"template: {{{name}}} has a format spec or conversion, which are not supported"
        for _, name, spec, conv in pieces
        if name is not None and (spec or conv)
    ]
    names = [name for _, name, _, _ in pieces if name]
    if not names:
        problems.append("template: uses no field (write `constant` for a fixed value)")

    parts = tuple((literal, name or None) for literal, name, _, _ in pieces)

    def slow(data: dict[str, Any]) -> str | None:
        out, found = [], False
        for literal, name in parts:
            out.append(literal)
            if name is not None:
                value = data.get(name)
                if type(value) is str and value.isascii() and value.isprintable():  # as_text's first case inline
                    value = value if value.strip() else None
                else:
                    try:
                        value = as_text(value)
                    except ValueProblem as exc:
                        raise ValueProblem(f"template field `{name}` {exc}") from None
                if value is not None:
                    found = True
                    out.append(value)
        return "".join(out).strip() if found else None

    # Every value an exact str that is not blank: the parts joined and the whole text checked once (it is
    # printable ASCII exactly when each piece is, and then `as_text` gives each value again and each is
    # found, so the walk above would join the same text). Anything else takes the walk (`slow`).
    # Given `unsure` for `odd`, it is a sure reader (`FieldRule.sure_reader`): its own answer is plain text.
    def render(data: dict[str, Any], odd: Callable[[Any], Any] = slow) -> Any:
        get, out = data.get, []
        for literal, name in parts:
            out.append(literal)
            if name is not None:
                value = get(name)
                if type(value) is not str or not value.strip():
                    return odd(data)
                out.append(value)
        text = "".join(out)
        return text.strip() if text.isascii() and text.isprintable() else odd(data)

    return (render if names else slow), problems, tuple(dict.fromkeys(names))


def _nothing(data: dict[str, Any]) -> None:
    return None


def _transforms(spec: FieldSpec, load: Callable[[str], Any]) -> tuple[list[tf.Transform], list[str]]:
    names = [spec.transform] if isinstance(spec.transform, str) else spec.transform
    out: list[tf.Transform] = []
    problems: list[str] = []
    for name in names:
        if name == tf.WITH_REGION:
            out.append(tf.e164(spec.region.upper() if spec.region else None))
        elif name in tf.PLAIN:
            out.append(tf.plain(name))
        elif ":" in name:
            try:
                out.append(tf.hooked(name, load(name)))
            except ValueError as exc:
                problems.append(f"transform: {exc}")
        else:
            problems.append(
                f'transform: unknown transform {name!r} (known: {", ".join((*tf.PLAIN, tf.WITH_REGION))}, or "package.module:function")'
            )
    if spec.region is not None:
        if tf.WITH_REGION not in names:
            problems.append("region: applies only with the e164 transform")
        elif spec.region.upper() not in phonenumbers.SUPPORTED_REGIONS:
            problems.append(f"region: {spec.region!r} is not a region code like US or GB")
    return out, problems


def compile_field(target: str, spec: Any, where: str, load: Callable[[str], Any]) -> tuple[FieldRule | None, list[str]]:
    """One rule from `target = spec`; problems are `where.target: ...` lines."""
    at = f"{where}.{target}"
    if isinstance(spec, str):
        spec = {"field": spec}
    if not isinstance(spec, dict):
        return None, [f'{at}: must be a field name or a table like {{ field = "Email", transform = "lower" }}']
    try:
        parsed = FieldSpec.model_validate(spec)
    except ValidationError as exc:
        return None, problems_from(exc, at)
    sources = [k for k in ("field", "template", "constant") if getattr(parsed, k) is not None]
    if len(sources) != 1:
        return None, [
            f"{at}: needs exactly one of `field`, `template` or `constant`"
            + (f" (has {', '.join(sources)})" if sources else "")
        ]
    problems: list[str] = []
    columns: tuple[str, ...] = ()
    sure_get: SureReader | None = None
    if parsed.field is not None:
        name = parsed.field
        get: Callable[[dict[str, Any]], Any] = lambda data: data.get(name)  # noqa: E731
        origin, columns = f"`{name}`", (name,)
    elif parsed.template is not None:
        get, template_problems, columns = _template(parsed.template)
        problems += template_problems
        origin, sure_get = "the template", cast(SureReader, get)
    else:
        constant = parsed.constant
        get, origin = (lambda data: constant), "the constant"
    transforms, transform_problems = _transforms(parsed, load)
    problems += transform_problems
    if problems:
        return None, [f"{at}.{p}" for p in problems]
    rule = FieldRule(
        target,
        origin,
        get,
        tuple(transforms),
        parsed.default,
        columns,
        parsed.on_error == "drop",
        parsed.field,
        sure_get,
    )
    return rule, []


TEXT_FIELDS = tuple(f for f in PERSON_FIELDS if f != "custom_fields")
