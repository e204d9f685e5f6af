"""`benchmarks/matching.py` times the matcher on every result shape the sandbox answers with, and
says what it settled: the figures are of a matching that placed each member as that shape allows,
not of one that gave up."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

MATCHING = Path(__file__).parents[2] / "benchmarks" / "matching.py"


def test_each_shape_is_timed_and_settled_as_far_as_its_evidence_goes() -> None:
    done = subprocess.run(
        [sys.executable, str(MATCHING), "--members", "200", "--passes", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=MATCHING.parent,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(MATCHING.parents[1]), str(MATCHING.parent)])},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = {
        m["label"]: m["settled"]
        for m in re.finditer(
            r"^(?P<label>\w+, [\w ]+?) +[\d.]+ us CPU/member \(.*members; (?P<settled>.*)\)$", done.stdout, re.M
        )
    }
    assert lines == {
        # Placed one by one: by key and echoes, by the email, or by indices counted from 1.
        **{f"{shape}, all captured": "captured 200" for shape in ("echo", "nested", "index1", "array_index")},
        **{
            f"{shape}, mixed": "captured 160, duplicate 20, failed 20"
            for shape in ("echo", "nested", "index1", "array_index")
        },
        # No evidence: one array settles by count, three cannot.
        "bare, all captured": "captured 200",
        "bare, mixed": "unknown 200",
    }, done.stdout
