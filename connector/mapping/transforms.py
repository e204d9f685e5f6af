"""Value transforms of the mapping config: text in, text out (None: absent), ValueProblem on bad input.
`phonenumbers` (some 15 ms to import) loads with the first `e164` transform a config names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .values import ValueProblem, as_text

Transform = Callable[[str], str | None]
WITH_REGION = "e164"


def _split_name(full: str) -> tuple[str | None, str | None]:
    """ "Ada King Lovelace" -> ("Ada King", "Lovelace"); "Lovelace, Ada" -> ("Ada", "Lovelace")."""
    if "," in full:
        last, _, first = full.partition(",")
        return first.strip() or None, last.strip() or None
    words = full.split()
    if len(words) < 2:
        return (words[0] if words else None), None
    return " ".join(words[:-1]), words[-1]


def is_region(code: str) -> bool:
    """A region code phonenumbers knows (US, GB, ...): what `e164`'s `region` may be."""
    import phonenumbers

    return code.upper() in phonenumbers.SUPPORTED_REGIONS


def e164(region: str | None) -> Transform:
    """Only numbers phonenumbers holds valid: a merely possible one such as 555-0100 (US, no area
    code) would become +15550100, a number that reaches nobody. Plain spellings of valid numbers
    take phones.fast_e164_for's steps, each called here (`e164_steps`: the same answer at a fraction
    of the cost); the rest, and every reason for a refusal, come from phonenumbers itself."""
    import phonenumbers

    from .phones import e164_steps

    express, walk = e164_steps(region)

    def to_e164(value: str) -> str:
        fast = express(value)
        if fast is not None:
            return fast
        fast = walk(value)
        if fast is not None:
            return fast
        try:
            number = phonenumbers.parse(value, region)
        except phonenumbers.NumberParseException:
            hint = "" if region else " (a national number needs `region`)"
            raise ValueProblem(f"is not a phone number{hint}") from None
        if not phonenumbers.is_valid_number(number):
            raise ValueProblem("is not a valid phone number" + (f" for region {region}" if region else ""))
        return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)

    return to_e164


_PLAIN: dict[str, Transform] = {
    "strip": str.strip,
    "lower": str.lower,
    "upper": str.upper,
    "first_name": lambda v: _split_name(v)[0],
    "last_name": lambda v: _split_name(v)[1],
}


PLAIN = tuple(_PLAIN)


def plain(name: str) -> Transform:
    return _PLAIN[name]


class _Hooked:
    """A user's `package.module:function` as a transform; its failure is the record's problem. A
    class of its own so that the mapper can tell it from the built-in transforms (`is_hooked`)."""

    __slots__ = ("fn", "ref")

    def __init__(self, ref: str, fn: Callable[[str], Any]) -> None:
        self.ref, self.fn = ref, fn

    def __call__(self, value: str) -> str | None:
        try:
            result = self.fn(value)
        except Exception as exc:
            raise ValueProblem(f"transform {self.ref} failed: {type(exc).__name__}: {exc}") from None
        return as_text(result)


def hooked(ref: str, fn: Callable[[str], Any]) -> Transform:
    return _Hooked(ref, fn)


def is_hooked(transform: Transform) -> bool:
    """Whether it runs a user's function, which may not be pure (the built-in transforms are)."""
    return isinstance(transform, _Hooked)
