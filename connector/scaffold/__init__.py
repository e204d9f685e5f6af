"""`capture-sync sources new NAME`: a complete source plugin package, rendered from the plain files
under `template/` (package data), so that what a new author starts from is a package whose own
tests pass as generated, not a snippet to complete.

Each template file is rendered with `string.Template` (`$name`, `$module`, ...; `$$` for a dollar);
its path drops the `.tmpl` suffix (kept so that pytest, mypy and setuptools never take a template
for code of capture-sync) and its `package/` folder becomes the plugin's module.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from string import Template

from ..plugins import BUILTINS

__all__ = ["PluginName", "ScaffoldError", "new_plugin"]

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_SUFFIX = ".tmpl"


class ScaffoldError(ValueError):
    """The name or the target folder cannot be used; the message is one line for the user."""


@dataclass(frozen=True)
class PluginName:
    """The names one source type name gives a plugin: the entry point `name`, the distribution
    `capture-sync-<name>`, the module `capture_sync_<name>` and the class `<Name>Source`."""

    name: str

    @classmethod
    def parse(cls, name: str) -> PluginName:
        if not _NAME.match(name) or name.endswith("_") or "__" in name:
            raise ScaffoldError(
                f"{name!r} is not a usable source type name: lower-case letters, digits and single '_' "
                "inside, starting with a letter, up to 40 characters (e.g. spreadsheet, crm_export)"
            )
        if keyword.iskeyword(name) or name in BUILTINS:
            raise ScaffoldError(f"{name!r} is taken (a Python keyword or a built-in source type): pick another name")
        return cls(name)

    @property
    def dist(self) -> str:
        return "capture-sync-" + self.name.replace("_", "-")

    @property
    def module(self) -> str:
        return "capture_sync_" + self.name

    @property
    def class_name(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_")) + "Source"


def new_plugin(name: str, target: Path | None = None) -> tuple[Path, list[Path]]:
    """Write the package for source type `name` into `target` (default `./capture-sync-<name>`),
    which must be absent or empty; returns the folder and the files written. Raises ScaffoldError."""
    plugin = PluginName.parse(name)
    folder = Path(plugin.dist) if target is None else target
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ScaffoldError(f"{folder} already exists and is not an empty folder: pick another --dir")
    from .. import __version__

    values = {
        "name": plugin.name,
        "dist": plugin.dist,
        "module": plugin.module,
        "class_name": plugin.class_name,
        "capture_sync_version": __version__,
    }
    written = []
    for rel, template in _templates(resources.files(__name__) / "template", ()):
        path = folder.joinpath(*(plugin.module if part == "package" else part for part in rel))
        path = path.with_name(path.name.removesuffix(_SUFFIX))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(Template(template.read_text(encoding="utf-8")).substitute(values), encoding="utf-8")
        written.append(path)
    return folder, written


def _templates(folder: Traversable, rel: tuple[str, ...]) -> list[tuple[tuple[str, ...], Traversable]]:
    """Every template file under `folder`, with its path as parts, in a stable order."""
    found = []
    for item in sorted(folder.iterdir(), key=lambda t: t.name):
        if item.is_dir():
            if item.name != "__pycache__":
                found += _templates(item, (*rel, item.name))
        elif item.name.endswith(_SUFFIX):
            found.append(((*rel, item.name), item))
    return found
