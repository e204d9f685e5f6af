"""docs/plugins.md cannot drift: every `connector.…` name it mentions or imports exists; it covers the
whole public toolkit and every hook of the plugin kit; the scaffold's tests and the example plugin's
implement every hook; its worked example is the scaffold's source as `sources new` writes it."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import connector.incremental
import connector.source
from connector.scaffold import new_plugin
from connector.testing import SourceContract

ROOT = Path(__file__).resolve().parents[2]
GUIDE = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
CODE = re.findall(r"```python\n(.*?)```", GUIDE, re.S)

# The plugin kit's hooks: what a SourceContract subclass may define, as opposed to its own tests
# and helpers. A hook added to connector/testing.py fails the test below until it is listed here,
# documented in the guide and implemented by the scaffold and the example.
HOOKS = ("source_options", "add_records", "invalid_options", "broken_options", "bad_options")
CONTRACT_HELPERS = {"build", "read", "records", "bad_read"}
SOURCE_NAMES = ("Source", "SourceOptions", "Record", "BadRecord", "Passed", "Item", "SourceError", "ConfigPath")


def _resolve(dotted: str) -> object:
    """The object a dotted name names: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def _mentioned() -> set[str]:
    names = set(re.findall(r"\bconnector(?:\.[A-Za-z_]\w*)+", GUIDE))
    for block in CODE:
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("connector"):
                names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name.rstrip(".") for name in names}


@pytest.mark.parametrize("name", sorted(_mentioned()))
def test_every_public_name_the_guide_mentions_exists(name: str) -> None:
    assert _resolve(name) is not None


def test_the_guide_mentions_the_whole_public_toolkit() -> None:
    for name in connector.incremental.__all__:
        assert f"connector.incremental.{name}" in GUIDE, name
    for name in SOURCE_NAMES:
        assert f"connector.source.{name}" in GUIDE or f"`{name}`" in GUIDE, name
        assert hasattr(connector.source, name), name


def test_the_hooks_listed_here_are_the_contracts_hooks_and_the_guide_explains_each() -> None:
    own = {
        name for name, value in vars(SourceContract).items() if callable(value) and not name.startswith(("_", "test_"))
    }
    assert own - CONTRACT_HELPERS == set(HOOKS)
    for hook in HOOKS:
        assert re.search(rf"^\| `{hook}(\(options\))?` \|", GUIDE, re.M), f"the guide's hook table lacks {hook}"


def _defines_every_hook(source: str, where: str) -> None:
    tree = ast.parse(source)
    classes = [
        n
        for n in tree.body
        if isinstance(n, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id == "SourceContract" for b in n.bases)
    ]
    assert classes, f"{where}: no SourceContract subclass"
    defined = {n.name for n in classes[0].body if isinstance(n, ast.FunctionDef)}
    assert set(HOOKS) <= defined, f"{where} lacks the hooks {sorted(set(HOOKS) - defined)}"


def test_the_example_plugin_and_the_scaffold_implement_every_hook(tmp_path: Path) -> None:
    example = ROOT / "examples" / "capture-sync-example-source" / "tests" / "test_vcard_source.py"
    _defines_every_hook(example.read_text(encoding="utf-8"), str(example))
    folder, _ = new_plugin("team_contacts", tmp_path / "plugin")
    _defines_every_hook((folder / "tests" / "test_source.py").read_text(encoding="utf-8"), "the scaffold's tests")


def test_the_worked_example_is_the_scaffolds_source(tmp_path: Path) -> None:
    folder, _ = new_plugin("team_contacts", tmp_path / "plugin")
    generated = (folder / "capture_sync_team_contacts" / "source.py").read_text(encoding="utf-8")
    worked = GUIDE.split("## A worked example", 1)[1]
    assert re.findall(r"```python\n(.*?)```", worked, re.S)[0] == generated


def test_the_readme_links_the_guide() -> None:
    """From the README's reading list, and from the sources page of the site."""
    assert "(docs/plugins.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(plugins.md)" in (ROOT / "docs" / "sources.md").read_text(encoding="utf-8")
