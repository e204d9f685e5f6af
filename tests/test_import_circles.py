"""No import circles among the modules of `connector` and `sources`: a module's imports at module
level (those under `if TYPE_CHECKING:` included, as a type checker and a reader follow them) form a
graph without cycles. Imports inside a function are left out: they are how a command defers a heavy
import until it is needed, and run after every module involved has loaded."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _modules() -> dict[str, Path]:
    found = {}
    for path in [*ROOT.glob("connector/**/*.py"), *ROOT.glob("sources/**/*.py")]:
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement run when the module loads: into if/try/with/class bodies, never into a def."""
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        yield stmt
        for block in ("body", "orelse", "finalbody"):
            yield from _module_level(getattr(stmt, block, []))
        for handler in getattr(stmt, "handlers", []):
            yield from _module_level(handler.body)


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules `name` imports at load time, the packages above each included (their `__init__` runs first)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for stmt in _module_level(ast.parse(path.read_text(encoding="utf-8")).body):
        if isinstance(stmt, ast.Import):
            targets.update(alias.name for alias in stmt.names)
        elif isinstance(stmt, ast.ImportFrom):
            base = stmt.module or ""
            if stmt.level:
                up = package.split(".")[: len(package.split(".")) - stmt.level + 1]
                base = ".".join([*up, *([stmt.module] if stmt.module else [])])
            targets.update(
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in stmt.names
            )
    found = set()
    for target in targets:
        parts = target.split(".")
        found.update(".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in modules)
    # a module's own packages are loaded before it: importing them is no edge back
    return {m for m in found if m != name and not name.startswith(m + ".")}


def test_no_module_imports_itself_through_a_circle() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        raise AssertionError(f"an import circle: {' -> '.join(exc.args[1])}") from None


def test_the_walk_sees_a_circle_through_a_type_checking_import(tmp_path: Path) -> None:
    """The check itself: `if TYPE_CHECKING:` imports count, a function's own imports do not."""
    (tmp_path / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n")
    (tmp_path / "b.py").write_text("from .a import A\ndef f():\n    from .c import C\n")
    (tmp_path / "c.py").write_text("from .b import B\n")
    modules = {f"p.{n}": tmp_path / f"{n}.py" for n in "abc"}
    assert _imports("p.a", modules["p.a"], modules) == {"p.b"}
    assert _imports("p.b", modules["p.b"], modules) == {"p.a"}
    assert _imports("p.c", modules["p.c"], modules) == {"p.b"}
