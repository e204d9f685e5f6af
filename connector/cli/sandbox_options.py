"""What the `sandbox` commands share: the default port, and the fault options, defined once from
`FaultSettings` for `sandbox serve` (the faults it starts with) and `sandbox faults set` (a change
to a running sandbox's), so the two cannot drift apart."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, cast

import typer
from pydantic import ValidationError

from ..api.models import explain
from ..sandbox.fault_settings import FaultSettings

DEFAULT_PORT = 8765  # the port of design.md's example config, so a config written for it keeps working

# A yes/no fault is a pair of flags, so that `faults set` can switch it off again.
_OFF_FLAGS = {"refuse_credentials": "--accept-credentials", "no_person_replay": "--person-replay"}


def _option(name: str, description: str | None) -> Any:
    flag = "--" + name.replace("_", "-")
    flags = f"{flag}/{_OFF_FLAGS[name]}" if name in _OFF_FLAGS else flag
    return typer.Option(None, flags, help=description, show_default=False, rich_help_panel="Faults")


def fault_options(fn: Callable[..., None]) -> Callable[..., None]:
    """Give the command one option per field of `FaultSettings` (`--p-fatal-503`, `--latency-ms`, ...),
    and pass it those given on the command line as `faults`, a dict (options not given left out)."""
    fields = FaultSettings.model_fields
    sig = inspect.signature(fn)
    own = [p for p in sig.parameters.values() if p.name != "faults"]
    extra = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=_option(name, field.description),
            annotation=cast(Any, field.annotation) | None,
        )
        for name, field in fields.items()
    ]

    @functools.wraps(fn)
    def wrapper(**kwargs: Any) -> None:
        given = {name: value for name in fields if (value := kwargs.pop(name)) is not None}
        fn(faults=given, **kwargs)

    wrapper.__signature__ = sig.replace(parameters=own + extra)  # type: ignore[attr-defined]
    own_annotations = {k: v for k, v in fn.__annotations__.items() if k != "faults"}
    wrapper.__annotations__ = {**own_annotations, **{p.name: p.annotation for p in extra}}
    return wrapper


def fault_settings(given: dict[str, Any]) -> FaultSettings:
    """The faults of the options given (the others: none); impossible values are a usage error (exit 2)."""
    try:
        return FaultSettings(**given)
    except ValidationError as exc:
        raise typer.BadParameter("; ".join(explain(exc))) from None
