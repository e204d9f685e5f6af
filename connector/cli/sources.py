"""`capture-sync sources list`: the installed source types and the options each one takes."""

from __future__ import annotations

import json
from typing import Any

import typer
from pydantic.fields import FieldInfo

from ..plugins import SourceType, discover

app = typer.Typer(help="Source types: the built-ins and installed plugins.", no_args_is_help=True)


def _option_line(name: str, field: FieldInfo) -> str:
    default = "required" if field.is_required() else f"default {json.dumps(field.get_default(call_default_factory=True), default=str)}"
    return f"    {name:<16} {default:<24} {field.description or ''}".rstrip()


def _describe(found: SourceType) -> list[str]:
    head = f"{found.name}  ({found.origin}, {found.target})"
    if found.cls is None:
        return [head, f"    does not load: {found.error}"]
    summary = (found.cls.__doc__ or "").strip().splitlines()
    lines = [head] + ([f"    {summary[0]}"] if summary else [])
    return lines + [_option_line(n, f) for n, f in found.cls.Options.model_fields.items()]


def _as_dict(found: SourceType) -> dict[str, Any]:
    """One source type for `--json`: what `_describe` prints, as fields."""
    options = {} if found.cls is None else {
        name: {
            "required": field.is_required(),
            "default": None if field.is_required() else field.get_default(call_default_factory=True),
            "description": field.description,
        }
        for name, field in found.cls.Options.model_fields.items()
    }
    lines = (found.cls.__doc__ or "").strip().splitlines() if found.cls else []
    return {
        "name": found.name, "origin": found.origin, "target": found.target, "loads": found.cls is not None,
        "error": found.error, "summary": lines[0] if lines else None, "options": options,
    }


@app.command("list")
def list_sources(
    as_json: bool = typer.Option(False, "--json", help="One JSON object {\"sources\": [...]} on stdout."),
) -> None:
    """Show each installed source type (built-in or plugin) with its options."""
    if as_json:
        typer.echo(json.dumps({"sources": [_as_dict(found) for found in discover()]}, default=str))
        return
    blocks = ["\n".join(_describe(found)) for found in discover()]
    typer.echo("\n\n".join(blocks))
