"""`benchmarks/read_side.py` keeps working: each step of the read side measured in a child per
checkout, alternately. Its timings are noise at this size and are not checked."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

READ_SIDE = Path(__file__).parents[2] / "benchmarks" / "read_side.py"
_spec = importlib.util.spec_from_file_location("read_side", READ_SIDE)
assert _spec is not None and _spec.loader is not None
_read_side = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_read_side)
STEPS = list(_read_side.STEPS)  # the steps it measures, each printed in its table


def test_the_read_side_runs_both_trees_alternately_and_prints_every_step() -> None:
    tree = str(READ_SIDE.parents[1])
    done = subprocess.run(
        [sys.executable, str(READ_SIDE), "--records", "200", "--rounds", "2", "--base", tree],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rounds = [line.split(":")[0] for line in done.stdout.splitlines() if line.startswith("round")]
    assert rounds == ["round 1 this", "round 1 base", "round 2 base", "round 2 this"]
    table = done.stdout.split("records\n", 1)[1].splitlines()
    assert [line.split("  this ")[0].strip() for line in table] == STEPS
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
