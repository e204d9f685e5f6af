"""Pure pieces of the sandbox: the rate window, identities, fault draws."""

from __future__ import annotations

import pytest

from connector.api.models import PersonInput
from connector.sandbox import Faults, identity_of
from connector.sandbox.ratelimit import SlidingWindow


def test_the_window_admits_up_to_the_limit_then_says_when_a_slot_frees():
    window = SlidingWindow(60.0)
    assert [window.admit("c", 2, now=t) for t in (0.0, 10.0)] == [None, None]
    assert window.admit("c", 2, now=30.5) == 30  # the first hit leaves the window at 60
    assert window.admit("other", 2, now=30.5) is None  # per client
    assert window.admit("c", 2, now=60.0) is None  # ... and it did
    assert window.admit("c", 2, now=60.0) == 10


def test_identity_is_the_folded_email_else_the_phone_digits():
    assert identity_of(PersonInput(name="A", email=" Ada@Example.ORG ".strip())) == "email:ada@example.org"
    assert identity_of(PersonInput(name="A", phone="+1 (555) 010-0199")) == "phone:15550100199"
    assert identity_of(PersonInput(name="A", email="a@example.org", phone="1")) == "email:a@example.org"


def test_fault_draws_repeat_with_the_seed_and_respect_the_probabilities():
    def draws(seed: int) -> list[str | None]:
        faults = Faults(p_retryable_503=0.3, p_fatal_503=0.2, seed=seed)
        return [faults.outage() for _ in range(200)]

    assert draws(5) == draws(5) != draws(6)
    assert set(draws(5)) == {"retryable", "fatal", None}
    assert Faults().outage() is None and Faults().drop_after_commit() is False
    assert all(Faults(p_commit_drop=1.0).drop_after_commit() for _ in range(5))


def test_latency_spikes_add_their_length_to_some_requests_only():
    faults = Faults(latency_s=0.05, p_latency_spike=0.25, spike_s=2.0, seed=3)
    delays = [faults.delay_s() for _ in range(400)]
    assert set(delays) == {0.05, 2.05}
    assert 40 < delays.count(2.05) < 160
    assert Faults(latency_s=0.05).delay_s() == 0.05


def test_one_draw_shares_out_503s_and_429s_and_a_change_keeps_drawing_from_the_same_seed():
    faults = Faults(p_retryable_503=0.2, p_fatal_503=0.2, p_429=0.2, seed=4)
    assert {faults.outage() for _ in range(200)} == {"retryable", "fatal", "throttled", None}

    def after_a_change(seed: int | None) -> list[str | None]:
        changed = Faults(p_429=0.5, seed=9)
        changed.outage()
        changed = changed.replaced(retry_after_s=5, seed=seed)
        return [changed.outage() for _ in range(20)]

    straight = Faults(p_429=0.5, seed=9)
    assert after_a_change(9) == [straight.outage() for _ in range(21)][1:]  # the sequence goes on
    fresh = Faults(p_429=0.5, seed=10)
    assert after_a_change(10) == [fresh.outage() for _ in range(20)]  # a new seed starts its own


@pytest.mark.parametrize(
    "bad",
    [
        {"p_retryable_503": 1.5},
        {"p_retryable_503": 0.6, "p_fatal_503": 0.6},
        {"latency_s": -1},
        {"p_latency_spike": 2.0},
        {"spike_s": -1},
        {"p_429": 0.5, "p_fatal_503": 0.6},
        {"retry_after_s": -1},
    ],
)
def test_impossible_fault_settings_are_refused(bad):
    with pytest.raises(ValueError, match=r"must (be between 0 and 1|not exceed 1|not be negative)"):
        Faults(**bad)
