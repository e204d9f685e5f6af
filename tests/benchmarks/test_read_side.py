"""`benchmarks/read_side.py` keeps working: each step of the read side measured in a child per
checkout, alternately. Its timings are noise at this size and are not checked."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .alternation import run_against_itself

READ_SIDE = Path(__file__).parents[2] / "benchmarks" / "read_side.py"


def _steps() -> list[str]:
    """The steps the script measures, from the script itself (its imports need benchmarks/ on the path)."""
    code = "import sys; sys.path.insert(0, sys.argv[1]); import read_side; print(*read_side.STEPS, sep='\\n')"
    done = subprocess.run([sys.executable, "-c", code, str(READ_SIDE.parent)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def test_the_read_side_runs_both_trees_alternately_and_prints_every_step() -> None:
    output = run_against_itself("read_side.py", "--records", "200")
    table = output.split("records\n", 1)[1].splitlines()
    assert [line.split("  this ")[0].strip() for line in table] == _steps()
    assert all("   base " in line for line in table)


def test_the_read_side_counts_a_steps_instructions_under_valgrind() -> None:
    if shutil.which("valgrind") is None:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail("valgrind not found (.ci/run installs it)")
        pytest.skip("valgrind not found (apt-get install valgrind)")
    done = subprocess.run(
        [sys.executable, str(READ_SIDE), "--instructions", "raw digest"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = done.stdout.splitlines()[-1].split()
    assert line[:3] == ["raw", "digest", "this"]
    assert float(line[3].replace(",", "")) > 1_000  # a digest of a record is thousands of instructions
