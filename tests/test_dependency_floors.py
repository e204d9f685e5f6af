"""The dependency floors stay past the advisories they were raised for (tools/advisories.toml), in
pyproject.toml and in the environment the tests run in. Offline, so it runs in `make test`; the
online audit is `make audit`."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("audit", ROOT / "tools" / "audit.py")
assert _spec is not None and _spec.loader is not None
audit = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(audit)


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = [r for group in project["optional-dependencies"].values() for r in group]
    return [Requirement(r) for r in [*project["dependencies"], *extras]]


def test_every_requirement_of_an_advised_package_has_a_floor_past_the_fix() -> None:
    requirements = _requirements()
    for advisory in audit.vendored():
        name = canonicalize_name(advisory.get("declared", advisory["package"]))
        named = [r for r in requirements if canonicalize_name(r.name) == name]
        assert named, f"{advisory['id']}: pyproject.toml does not require {name}"
        for requirement in named:
            floors = [Version(s.version) for s in requirement.specifier if s.operator in (">=", "==", "~=")]
            assert floors and max(floors) >= Version(advisory["fixed_in"]), (advisory["id"], str(requirement))


def test_no_installed_package_is_below_a_vendored_fix() -> None:
    assert audit.below_vendored_fixes() == []
