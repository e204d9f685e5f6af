"""The scaffold as a new author meets it (issue 22): `sources new` writes a package; installed, with
capture-sync, into a fresh environment, its own tests pass, `sources list` shows it and `sources
preview` reads its sample.

The environment is a new venv holding the two packages, built from their folders (capture-sync from
a copy of this tree, so the templates must come as package data); their dependencies come from this
test's own environment (a .pth line), so the test needs no package index and runs offline. PYTHONPATH
is dropped, so nothing is imported from this tree. One test: a venv and two builds take ~20 s.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 300


def sh(*args: str | Path, cwd: Path) -> str:
    """Run outside this tree (a `python -c` imports from its working directory first)."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("CAPTURE_")
    }
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env, timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"{args}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_a_new_plugin_installed_in_a_fresh_environment_passes_its_tests_is_listed_and_previews(kit, tmp_path):
    plugin = tmp_path / "plugin"
    result = kit.run("sources", "new", "team_contacts", "--dir", str(plugin))
    assert result.code == 0, result.stderr

    source = tmp_path / "capture-sync"  # built outside the tree, as pip would leave build/ behind in it
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("connector", "sources"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp_path / "venv"
    sh(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    purelib = sh(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path).strip()
    Path(purelib, "shared-dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    sh(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        source,
        plugin,
        cwd=tmp_path,
    )
    located = sh(python, "-c", "import connector; print(connector.__file__)", cwd=tmp_path)
    assert located.startswith(purelib), located  # the installed copy, not this tree

    tests = sh(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=plugin)
    assert " passed" in tests and "failed" not in tests and "error" not in tests, tests

    listed = {
        t["name"]: t
        for t in json.loads(sh(venv / "bin" / "capture-sync", "sources", "list", "--json", cwd=tmp_path))["sources"]
    }
    assert listed["team_contacts"]["origin"] == "capture-sync-team-contacts" and listed["team_contacts"]["loads"]
    assert {"path", "primary_key", "cursor", "cursor_type", "lookback"} <= set(
        listed["team_contacts"]["options_schema"]["properties"]
    )

    preview = sh(
        venv / "bin" / "capture-sync",
        "sources",
        "preview",
        "--type",
        "team_contacts",
        "--option",
        "path=sample/contacts.json",
        "--map",
        "first_name=first_name",
        "--map",
        "email=email",
        "--map",
        "phone=phone",
        "--json",
        cwd=plugin,
    )
    records = [json.loads(line) for line in preview.splitlines()]
    assert [r["id"] for r in records] == ["c1", "c2", "c3", "c4"]
    assert all("person" in r for r in records), records
