"""Chaos: an upstream that keeps changing, every fault the API shows, every shape of bulk result,
and SIGKILLs at random moments and at the two moments that matter most (a batch written but not
sent; a response received but not settled).

Upstream, 800 contacts (10% invalid) are edited before every run and often during one: company,
last name and notes change (never the email, so the CRM's person stays the same) and new rows
arrive; the source reads changed rows by a number cursor. Before every run the sandbox restarts on
the same database with the next bulk result shape (echo, nested, index1, array_index, bare). It
answers retryable and non-retryable 503s, refuses some persons (listed in `failed`), commits then
drops the connection, has latency spikes, and really rate-limits (the connector is told a window a
quarter of the sandbox's, so its limiter lets too much through and meets real 429s). The connector
is run (sync and replay in turn) and killed 10 times: half by the test at a random moment of its
work, half by a failpoint. Then the world stands still and it runs until a replay exits 0.

Afterwards, against what the sandbox holds: 0 lost (each record's newest valid version is in the
CRM, or the CRM refused it and the ledger holds it `failed` with the reason), 0 doubled (no version
captured twice), 0 stale (the CRM's data of each record is its newest version), and the ledger
agrees (nothing pending, in flight, unknown or blocked; older versions final).

`make soak` runs this with SOAK_RECORDS=20000 SOAK_KILLS=50 and prints the figures.
"""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from connector.ledger._sqlite import DIALECT
from connector.ledger._types import state_of
from connector.sandbox import Behaviour, Faults
from connector.sandbox.behaviour import BulkResultShape

from .upstream import CURSOR, MAPPING, Upstream, check_versions

FAILPOINTS = ("after-batch-write", "after-response")
SHAPES: tuple[BulkResultShape, ...] = get_args(BulkResultShape)
ATTEMPTS = "SELECT count(*) FROM attempts"
# What the ledger must have recorded before the world may stand still: every fault, and versions
# superseded before they were sent and refused by the CRM.
SHOWN = {
    "a 429": "SELECT count(*) FROM attempts WHERE status_code = 429",
    "a retryable 503": "SELECT count(*) FROM attempts WHERE status_code = 503 AND retryable",
    "a non-retryable 503": "SELECT count(*) FROM attempts WHERE status_code = 503 AND NOT retryable",
    "a dropped response": "SELECT count(*) FROM attempts WHERE status_code IS NULL AND outcome = 'OutcomeUnknown'",
    "a superseded version": "SELECT count(*) FROM entries WHERE state = 'superseded'",
    "a refused version": "SELECT count(*) FROM entries WHERE state = 'failed'",
}
TWICE = "SELECT count(*) FROM (SELECT identity FROM captures GROUP BY identity HAVING count(*) > 1)"
# Records whose versions may be on their way to the CRM: the riskiest ones to change.
IN_HAND = f"SELECT DISTINCT record_id FROM entries WHERE {state_of(DIALECT, 'entries')} IN ('in_flight', 'unknown')"


@dataclass
class World:
    """The churn of the kill loop: before each run the sandbox restarts on its database with the
    result shape that has answered fewest requests so far (the config follows it to its new port)
    and the CSV changes, half of the changed rows being records the ledger has in flight or
    unknown; during a run the CSV changes again, half the time. It goes on until every shape has
    answered, every fault and kind of version in SHOWN is in the ledger, and some record has had a
    newer version captured over an older one."""

    rel: Any
    start_sandbox: Callable[..., Any]
    faults: Faults
    upstream: Upstream
    changed: float
    rng: random.Random
    box: Any = None
    edits_during_runs: int = 0
    _shifts: list[tuple[BulkResultShape, int]] = field(default_factory=list)

    @property
    def db(self) -> Path:
        return self.rel.tmp / "sandbox.sqlite3"

    @property
    def ledger(self) -> Path:
        return self.rel.tmp / "ledger.sqlite3"

    def restart(self, shape: BulkResultShape) -> None:
        if self.box is not None:
            self.box.server.stop()
        self._shifts.append((shape, self.rel.count(self.ledger, ATTEMPTS)))
        self.box = self.start_sandbox(
            db_path=self.db, faults=self.faults, rate_window_s=1.0, behaviour=Behaviour(bulk_result_shape=shape)
        )
        self.rel.config(
            self.rel.tmp, self.box.base_url, self.upstream.path, rate_window_s=0.25, mapping=MAPPING, cursor=CURSOR
        )

    def before_run(self, round_no: int) -> None:
        served = self.served()
        self.restart(min(SHAPES, key=served.__getitem__))
        self.edit()

    def during_run(self, round_no: int) -> None:
        if self.rng.random() < 0.5:
            self.edit()
            self.edits_during_runs += 1

    def edit(self) -> None:
        in_hand: list[str] = []
        if self.ledger.exists():
            with closing(sqlite3.connect(self.ledger, timeout=5)) as db:
                in_hand = [r for (r,) in db.execute(IN_HAND)]
        self.upstream.edit(self.changed, focus=in_hand)

    def served(self) -> Counter[str]:
        """Requests recorded in the ledger while each shape served."""
        ends = [at for _, at in self._shifts[1:]] + [self.rel.count(self.ledger, ATTEMPTS)]
        out: Counter[str] = Counter()
        for (shape, begin), end in zip(self._shifts, ends, strict=True):
            out[shape] += end - begin
        return out

    def pending(self) -> list[str]:
        served = self.served()
        todo = [f"{shape} results" for shape in SHAPES if not served[shape]]
        todo += [name for name, sql in SHOWN.items() if not self.rel.count(self.ledger, sql)]
        todo += [] if self.rel.count(self.db, TWICE) else ["a newer version captured over an older one"]
        return todo + ([] if self.edits_during_runs else ["an edit during a run"])


def test_chaos_changing_upstream_faults_shapes_and_kills_lose_nothing_double_nothing_leave_nothing_stale(
    rel, sandbox_factory, tmp_path
):
    records, kills = rel.scaled("SOAK_RECORDS", 800), rel.scaled("SOAK_KILLS", 10)
    rng = random.Random(records * 1000 + kills)
    faults = Faults(
        p_retryable_503=0.08,
        p_fatal_503=0.04,
        p_commit_drop=0.08,
        latency_s=0.02,
        p_latency_spike=0.05,
        spike_s=0.4,
        p_person_fail=0.02,
        seed=11,
    )
    upstream = Upstream.create(tmp_path / "contacts.csv", records, rng)
    world = World(rel, sandbox_factory, faults, upstream, changed=min(200, max(5, records // 40)) / records, rng=rng)
    world.restart(SHAPES[0])
    env = rel.client(world.box.store, rate_limit=10)
    # Kills spread over the first load: each after up to twice a kill's share of its batches.
    share = max(2, records // 20 // kills)

    survived = rel.until_settled(
        tmp_path / "capture-sync.toml",
        env,
        rng,
        kills=kills,
        failpoints=FAILPOINTS,
        max_hit=share,
        sandbox_db=world.db,
        churn=world,
        max_work=4 * share,
        log_level="DEBUG" if records <= 2_000 else "INFO",
    )
    result = check_versions(world.box.store, upstream, world.ledger)
    print(
        f"\nchaos: kills survived {survived.kills} (test {survived.timer_kills}, failpoints "
        f"{survived.failpoint_kills}) in {survived.rounds} runs; upstream edits {upstream.edits} "
        f"({world.edits_during_runs} during a run); {result.line()}; ledger {rel.states(world.ledger)}; "
        f"requests per shape {dict(world.served())}"
    )

    assert survived.kills >= kills and survived.timer_kills >= 1
    assert all(survived.failpoint_kills.get(point, 0) >= 1 for point in FAILPOINTS), survived
    assert not world.pending()
