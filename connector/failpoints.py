"""Crash points for the reliability tests: `hit(name)` SIGKILLs this very process when the
environment asks for it, so a test can die exactly between two steps the ledger must survive.

    CAPTURE_SYNC_FAILPOINTS="after-batch-write=3"                 # killed on the 3rd hit
    CAPTURE_SYNC_FAILPOINTS="after-batch-write=0.1,after-response=0.1"  # each hit dies with p=0.1

A value with a decimal point is a probability per hit, a whole number the hit that kills. The
variable is read once at import; unset, `hit` is one dict lookup on an empty dict.
"""

from __future__ import annotations

import os
import random
import signal

ENV = "CAPTURE_SYNC_FAILPOINTS"


def parse(spec: str) -> dict[str, float | int]:
    """{name: probability (float) or the hit that kills (int)}; raises ValueError on a bad entry."""
    rules: dict[str, float | int] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"{ENV}: {item!r} is not name=value")
        number: float | int = float(value) if "." in value else int(value)
        if isinstance(number, float) and not 0.0 <= number <= 1.0:
            raise ValueError(f"{ENV}: the probability in {item!r} is not between 0 and 1")
        rules[name.strip()] = number
    return rules


_rules = parse(os.environ.get(ENV, ""))
_hits: dict[str, int] = {}


def hit(name: str) -> None:
    """Die here by SIGKILL (no cleanup, no flush: a crash) when the environment names this point."""
    rule = _rules.get(name)
    if rule is None:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if (_hits[name] == rule) if isinstance(rule, int) else random.random() < rule:
        os.kill(os.getpid(), signal.SIGKILL)
