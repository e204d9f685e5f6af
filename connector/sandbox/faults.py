"""Seeded fault injection: the failures a real Capture API shows, on demand and reproducibly.

503s (spec 7: retryable or not), 429s with a Retry-After (spec 8), every request refused with a
401 as if the secret had been rotated (spec 5), latency, a response lost after its commit, and a person the CRM
refuses although it is valid (`p_person_fail`): spec 4.3 processes each bulk person on its own,
so that person is listed in `failed` and the others are captured; POST /person answers it with a
400 (spec 7: "the person data is invalid"). Both use the error code `person_refused`. Under
`Behaviour(invalid_person="reject-request")` bulk persons are never refused this way (that server
refuses whole requests for invalid persons, never single valid ones); POST /person still is.

`no_person_replay` breaks spec 4.2 on purpose: a repeated POST /person Idempotency-Key (same body)
runs the capture again and answers `idempotent_replay: false` instead of replaying the stored
result, a server without idempotency; `check --flow` must fail its replay step against it.

A running sandbox swaps its whole `Faults` for another (`sandbox faults set`, admin.py), never
edits one in place; `replaced` keeps the draws going from the same generator while the seed stays.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any, Literal


@dataclass
class Faults:
    """Probabilities are per request (p_person_fail: per person); all off by default. `seed` makes a
    run repeatable: one generator draws every fault in the order the requests meet them."""

    p_retryable_503: float = 0.0
    p_fatal_503: float = 0.0
    latency_s: float = 0.0
    p_commit_drop: float = 0.0
    seed: int | None = None
    p_latency_spike: float = 0.0
    spike_s: float = 0.0
    p_person_fail: float = 0.0
    no_person_replay: bool = False  # a repeated POST /person key captures again (not a probability)
    p_429: float = 0.0
    retry_after_s: int = 1  # the Retry-After of the injected 429s
    refuse_credentials: bool = False  # every request a 401, as with a rotated secret (not a probability)
    _rng: random.Random = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in (
            "p_retryable_503",
            "p_fatal_503",
            "p_429",
            "p_commit_drop",
            "p_latency_spike",
            "p_person_fail",
        ):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1")
        if self.p_retryable_503 + self.p_fatal_503 + self.p_429 > 1.0:
            raise ValueError("p_retryable_503 + p_fatal_503 + p_429 must not exceed 1")
        if not (self.latency_s >= 0 and self.spike_s >= 0):  # NaN too
            raise ValueError("the latency and the spike must not be negative")
        if self.retry_after_s < 0:
            raise ValueError("retry_after_s must not be negative")
        self._rng = random.Random(self.seed)

    def replaced(self, **changes: Any) -> Faults:
        """These faults with `changes` (checked as at start). With the same seed the draws go on
        where they are, so a rehearsal stays repeatable; a new seed starts its sequence afresh."""
        new = replace(self, **changes)
        if new.seed == self.seed:
            new._rng = self._rng
        return new

    def outage(self) -> Literal["retryable", "fatal", "throttled"] | None:
        """Whether this request meets a 503 (retryable or fatal) or a 429 before anything is done.
        One draw picks among the three, so their shares add up as given."""
        if not (self.p_retryable_503 or self.p_fatal_503 or self.p_429):
            return None
        draw = self._rng.random()
        if draw < self.p_retryable_503:
            return "retryable"
        if draw < self.p_retryable_503 + self.p_fatal_503:
            return "fatal"
        if draw < self.p_retryable_503 + self.p_fatal_503 + self.p_429:
            return "throttled"
        return None

    def drop_after_commit(self) -> bool:
        return bool(self.p_commit_drop) and self._rng.random() < self.p_commit_drop

    def refuse_person(self) -> bool:
        """Whether the CRM refuses a valid person it would capture (a rule of its own, e.g. a
        blocked domain): the error `person_refused`, stored with the request's result so a retry
        under the same key meets the same refusal."""
        return bool(self.p_person_fail) and self._rng.random() < self.p_person_fail

    def delay_s(self) -> float:
        """This request's added latency: `latency_s`, plus `spike_s` with probability p_latency_spike."""
        spike = bool(self.p_latency_spike) and self._rng.random() < self.p_latency_spike
        return self.latency_s + (self.spike_s if spike else 0.0)
