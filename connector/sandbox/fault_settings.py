"""The sandbox's faults as an operator gives them: one definition for `sandbox serve`'s fault
options, `sandbox faults set`'s (both built from these fields, cli/sandbox_faults.py) and the JSON
of the admin endpoint (admin.py), in the units of the command line (milliseconds for latency).

The rules a value must keep (a share between 0 and 1, shares that add up to at most 1, nothing
negative) are `Faults`'s own: the model checks a set by building the `Faults` it stands for, so the
command line, the endpoint and a test constructing `Faults` refuse the same values the same way.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from .faults import Faults


class FaultSettings(BaseModel):
    """Every fault of a sandbox; the defaults are none at all."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)  # `true` is no share, "1" no number

    p_retryable_503: float = Field(
        default=0.0,
        description="Share of requests answered 503 with retryable: true (0 to 1).",
    )
    p_fatal_503: float = Field(
        default=0.0,
        description="Share of requests answered 503 with retryable: false (0 to 1).",
    )
    p_429: float = Field(
        default=0.0,
        description="Share of requests answered 429 rate_limited with a Retry-After of --retry-after-s "
        "(0 to 1; with the two 503 shares at most 1 in all).",
    )
    retry_after_s: int = Field(default=1, description="The Retry-After of the 429s of --p-429, seconds (default 1).")
    refuse_credentials: bool = Field(
        default=False,
        description="Answer every request 401 invalid_credentials, as after a rotated secret.",
    )
    latency_ms: int = Field(default=0, description="Latency added to every request, milliseconds.")
    p_latency_spike: float = Field(default=0.0, description="Share of requests with a latency spike (0 to 1).")
    spike_ms: int = Field(default=0, description="Extra latency of a spike, milliseconds.")
    p_commit_drop: float = Field(
        default=0.0,
        description="Share of captures whose connection is closed after the commit, the answer lost (0 to 1).",
    )
    p_person_fail: float = Field(
        default=0.0,
        description="Share of valid persons refused (code person_refused): listed in `failed` of a bulk "
        "request (not with --invalid-person reject-request), a 400 for POST /person (0 to 1).",
    )
    no_person_replay: bool = Field(
        default=False,
        description="A repeated POST /person Idempotency-Key captures again instead of replaying (breaks spec 4.2; "
        "check --flow fails its replay step).",
    )
    seed: int | None = Field(default=None, description="Seed for the fault draws (repeatable runs).")

    @model_validator(mode="after")
    def _possible(self) -> FaultSettings:
        try:
            Faults(**self.fault_fields())
        except ValueError as exc:  # it names the rule broken
            raise PydanticCustomError("impossible_faults", str(exc)) from None
        return self

    def fault_fields(self) -> dict[str, Any]:
        """The fields of the `Faults` these settings stand for."""
        fields = self.model_dump(exclude={"latency_ms", "spike_ms"})
        return {**fields, "latency_s": self.latency_ms / 1000, "spike_s": self.spike_ms / 1000}

    def faults(self) -> Faults:
        return Faults(**self.fault_fields())

    @classmethod
    def of(cls, faults: Faults) -> FaultSettings:
        """The settings of `faults` (latencies rounded to whole milliseconds)."""
        fields = {name: getattr(faults, name) for name in cls.model_fields if not name.endswith("_ms")}
        return cls(**fields, latency_ms=round(faults.latency_s * 1000), spike_ms=round(faults.spike_s * 1000))
