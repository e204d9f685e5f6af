"""The failpoints the chaos test kills the connector with: parsed once, dead on the hit asked for."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from connector.failpoints import ENV, parse

HITS = "from connector import failpoints\nfor n in range(1, 6):\n    failpoints.hit('p')\n    print(n, flush=True)\n"


def hits_survived(spec: str | None) -> tuple[int, list[str]]:
    env = {} if spec is None else {ENV: spec}
    proc = subprocess.run([sys.executable, "-c", HITS], capture_output=True, text=True, env=env, timeout=30)
    return proc.returncode, proc.stdout.split()


def test_a_whole_number_kills_on_that_hit_and_others_points_are_left_alone():
    assert hits_survived("p=3") == (-signal.SIGKILL, ["1", "2"])
    assert hits_survived("other=1") == (0, ["1", "2", "3", "4", "5"])
    assert hits_survived(None) == (0, ["1", "2", "3", "4", "5"])


def test_a_probability_kills_on_some_hit():
    assert hits_survived("p=1.0") == (-signal.SIGKILL, [])
    assert hits_survived("p=0.0") == (0, ["1", "2", "3", "4", "5"])


def test_the_spec_grammar():
    assert parse(" after-batch-write=0.1, after-response=2 ,") == {"after-batch-write": 0.1, "after-response": 2}
    assert parse("") == {}
    for bad in ("p", "=3", "p=x", "p=1.5"):
        with pytest.raises(ValueError, match=r"is not name=value|invalid literal for int|not between 0 and 1"):
            parse(bad)
