"""Making a frozen, slotted dataclass's instances on a hot path.

A frozen dataclass's `__init__` sets each field through `object.__setattr__` (its own `__setattr__`
refuses), which made a `Record` or a `Mapped`, one per source record, three times as dear to
construct as a plain slotted class's. `maker` writes the slots directly, through their descriptors:
the instance is the very one the constructor makes (equal, frozen against later changes, its
`__post_init__`-free class unchanged), for the classes that have no `__post_init__` or factory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def maker(cls: type[T]) -> Callable[..., T]:
    """A function taking `cls`'s fields in order (those with a default may be left out) and returning
    the instance `cls(...)` would, without its frozen `__init__`. Generated as dataclasses generates
    `__init__`, so each field is one direct call."""
    if not (dataclasses.is_dataclass(cls) and "__slots__" in cls.__dict__) or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} is not a slotted dataclass without __post_init__")
    params = dataclasses.fields(cls)
    if any(field.default_factory is not dataclasses.MISSING or not field.init for field in params):
        raise TypeError(f"{cls.__name__} has a field maker cannot set: a default factory, or init=False")
    if any(field.name == "obj" or field.name.startswith("_") or field.name not in cls.__dict__ for field in params):
        raise TypeError(f"{cls.__name__} has a field maker cannot set: one named as its own locals, or a base's")
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    signature = []
    for i, field in enumerate(params):
        scope[f"_set{i}"] = cls.__dict__[field.name].__set__
        if field.default is dataclasses.MISSING:
            signature.append(field.name)
        else:
            scope[f"_default{i}"] = field.default
            signature.append(f"{field.name}=_default{i}")
    body = "".join(f"    _set{i}(obj, {field.name})\n" for i, field in enumerate(params))
    exec(f"def make({', '.join(signature)}):\n    obj = _new(_cls)\n{body}    return obj\n", scope)
    make: Callable[..., T] = scope["make"]
    make.__qualname__ = make.__name__ = f"make_{cls.__name__}"
    return make
