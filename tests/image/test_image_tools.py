"""tools/image.py picks the Debian mirror debootstrap uses from this machine's apt sources, and
tools/pyproject_requirements.py lists what the Containerfile installs. Fast, no root: in `make test`."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


image = _tool("image")
pyproject_requirements = _tool("pyproject_requirements")


def _apt(tmp_path: Path, files: dict[str, str]) -> Path:
    (tmp_path / "sources.list.d").mkdir()
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_the_mirror_is_the_one_apt_uses_for_bookworm_main(tmp_path: Path) -> None:
    apt = _apt(
        tmp_path,
        {
            "sources.list.d/debian.sources": (
                "Types: deb\n# http://snapshot.example/archive\nURIs: http://security.example/debian-security\n"
                "Suites: bookworm-security\nComponents: main\n\n"
                "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm bookworm-updates\nComponents: main\n"
            ),
            "sources.list.d/other.sources": "Types: deb\nURIs: https://vendor.example/apt\nSuites: nodistro\nComponents: main\n",
        },
    )
    assert image.debian_mirror(apt) == "http://mirror.example/debian"


def test_one_line_sources_are_read_too(tmp_path: Path) -> None:
    apt = _apt(
        tmp_path,
        {
            "sources.list": "# deb http://commented.example/debian bookworm main\n"
            "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://mirror.example/debian bookworm main contrib\n",
        },
    )
    assert image.debian_mirror(apt) == "http://mirror.example/debian"


def test_no_bookworm_source_says_what_is_missing(tmp_path: Path) -> None:
    apt = _apt(tmp_path, {"sources.list": "deb http://mirror.example/debian trixie main\n"})
    with pytest.raises(SystemExit, match="no apt source for Debian bookworm main"):
        image.debian_mirror(apt)


def test_the_image_installs_the_runtime_requirements_and_the_extras_asked_for() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    runtime = pyproject_requirements.requirements(pyproject, "")
    assert runtime == pyproject["project"]["dependencies"]
    with_postgres = pyproject_requirements.requirements(pyproject, "postgres")
    assert with_postgres == runtime + pyproject["project"]["optional-dependencies"]["postgres"]
    assert pyproject_requirements.requirements(pyproject, "--build") == pyproject["build-system"]["requires"]
    with pytest.raises(SystemExit, match="unknown extra nope"):
        pyproject_requirements.requirements(pyproject, "nope")
