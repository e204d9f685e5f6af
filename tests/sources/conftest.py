"""Fixtures shared by the source tests (the PostgreSQL server is in tests/conftest.py): the
example plugin installed into the venv, and the CLI tests' `kit` for end-to-end syncs."""

from __future__ import annotations

import importlib
import importlib.metadata
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..cli.conftest import kit  # noqa: F401 - a fixture, shared with the end-to-end tests here

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "capture-sync-example-source"
EXAMPLE_MODULE = "capture_sync_example_source/__init__.py"


def _example_is_current() -> bool:
    try:
        dist = importlib.metadata.distribution("capture-sync-example-source")
    except importlib.metadata.PackageNotFoundError:
        return False
    installed = Path(str(dist.locate_file(EXAMPLE_MODULE)))
    same_code = installed.is_file() and installed.read_bytes() == (EXAMPLE / EXAMPLE_MODULE).read_bytes()
    same_entry_points = {(e.name, e.value) for e in dist.entry_points} == {
        ("vcard", "capture_sync_example_source:VCardSource")
    }
    return same_code and same_entry_points


@pytest.fixture(scope="session")
def example_plugin(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The example plugin installed into this venv (a normal install, so this process sees it)."""
    if not _example_is_current():
        build = tmp_path_factory.mktemp("example") / EXAMPLE.name  # build outside the tree
        shutil.copytree(EXAMPLE, build, ignore=shutil.ignore_patterns("build", "*.egg-info"))
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", str(build)],
            check=True,
            capture_output=True,
            timeout=300,
        )
        importlib.invalidate_caches()
    assert _example_is_current()
    return "vcard"
