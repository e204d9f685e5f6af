"""What the A/B benchmarks (`sync_ab.py`, `read_side.py`) share: this tree and `--base` measured in
turn, the order swapped each round so that a busy moment of the machine falls on both."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TREE = Path(__file__).parents[2]


def run_against_itself(script: str, *args: str) -> str:
    """Run `benchmarks/SCRIPT ARGS --rounds 2 --base TREE` (this tree as its own base) and return its
    output once it ran both trees in the alternating order: this, base, then base, this."""
    done = subprocess.run(
        [sys.executable, str(TREE / "benchmarks" / script), *args, "--rounds", "2", "--base", str(TREE)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rounds = [line.split(":")[0] for line in done.stdout.splitlines() if line.startswith("round")]
    assert rounds == ["round 1 this", "round 1 base", "round 2 base", "round 2 this"]
    return done.stdout
