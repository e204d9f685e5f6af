"""`benchmarks/read_side.py` keeps working: each step of the read side measured in a child per
checkout, alternately. Its timings are noise at this size and are not checked."""

from __future__ import annotations

from .alternation import run_against_itself

STEPS = [
    "csv source",
    "jsonl source",
    "plugin boundary",
    "raw digest",
    "map (payload_noting)",
    "map and encode (to_mapped)",
]


def test_the_read_side_runs_both_trees_alternately_and_prints_every_step() -> None:
    output = run_against_itself("read_side.py", "--records", "200")
    table = output.split("records\n", 1)[1].splitlines()
    assert [line.split("  this ")[0].strip() for line in table] == STEPS
    assert all("   base " in line for line in table)
