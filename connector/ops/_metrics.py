"""The daemon's Prometheus metrics: names, labels, and where each value comes from.

Labels only ever hold the integration's name, a source name, an operation, an HTTP status code or a
ledger state: never a key, an email or a record value, so a scrape holds no contact data and the
series stay few. Every series carries `integration` (`[integration] name`, or the config file's
stem), so one dashboard tells apart daemons and integrations sharing a ledger database.

Requests, their latency and retries are counted as they happen (a client observer); everything
else is read at scrape time from the daemon's health and a ledger snapshot, so /metrics can never
disagree with `capture-sync status` or the status page.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..api.client import Attempt
from ..delivery import AdaptiveRateLimiter

if TYPE_CHECKING:
    from ..api.client import CaptureClient
    from ..health import DaemonHealth
    from ._snapshot import SettledTally, Snapshot

PREFIX = "capture_sync"
LATENCY_BUCKETS_S = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# read-side counters of a source's passes: (metric name, DaemonHealth.read_totals key, help)
READ_COUNTERS = (
    ("records_read", "read", "Records the source's passes read (valid or not)."),
    ("records_queued", "enqueued", "Records queued in the ledger for delivery (new or changed content)."),
    ("records_unchanged", "unchanged", "Records read again with content the ledger already holds: nothing to send."),
    (
        "records_rejected",
        "rejected",
        "Records set aside as rejected (unreadable or refused by the mapping); never sent.",
    ),
    (
        "records_late",
        "late",
        "Rows an incremental read passed over below its cursor that the ledger never saw: not read "
        "(set `lookback`, or use the snapshot mode).",
    ),
)
SETTLED_COUNTERS = (
    ("persons_captured", "captured", "Persons the CRM captured (listed in `successful`)."),
    (
        "records_merged",
        "merged",
        "Captured records answered with a person id the ledger already held for another "
        "record: the CRM merged them by identity (also counted in persons_captured).",
    ),
    ("persons_duplicates", "duplicate", "Persons the CRM merged as duplicates (listed in `duplicates`)."),
    ("persons_failed", "failed", "Persons the CRM refused (in `failed`, or a non-retryable error)."),
)


class Metrics:
    """One registry per daemon (never the global one: tests run several in one process); what is
    scraped (`registry`) is the integration's own series with its `integration` label added."""

    def __init__(
        self,
        health: DaemonHealth,
        client: CaptureClient,
        sources: list[str],
        window_s: float,
        *,
        integration: str,
    ) -> None:
        disable_created_metrics()  # no `_created` series beside every counter: nothing here reads them
        own = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            f"{PREFIX}_requests",
            "Capture API attempts by operation and HTTP status ('none': no response).",
            ["operation", "status"],
            registry=own,
        )
        self.latency = Histogram(
            f"{PREFIX}_request_duration_seconds",
            "Capture API attempt latency, each retry its own attempt.",
            ["operation"],
            buckets=LATENCY_BUCKETS_S,
            registry=own,
        )
        self.retries = Counter(
            f"{PREFIX}_retries",
            "Attempts that re-sent a request (same key, same body) after a 429, a retryable 503 or a lost connection.",
            ["operation"],
            registry=own,
        )
        self.window = _Window(window_s)
        self.state = _StateCollector(health, client, sources, self.window)
        own.register(self.state)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Labelled(own, integration))

    def observe(self, attempt: Attempt) -> None:
        """A client observer: called on the event loop for every attempt, so it stays O(1)."""
        status = str(attempt.status_code) if attempt.status_code is not None else "none"
        self.requests.labels(attempt.operation, status).inc()
        self.latency.labels(attempt.operation).observe(attempt.latency_s)
        if attempt.number > 1:
            self.retries.labels(attempt.operation).inc()
        if attempt.status_code is not None:  # the server saw it: it counts against the rate limit
            self.window.add(attempt.started_at)


class _Labelled(Collector):
    """Every series of `inner` with `integration="<name>"` added (a constant label)."""

    def __init__(self, inner: CollectorRegistry, integration: str) -> None:
        self.inner, self.integration = inner, integration

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        for family in self.inner.collect():
            labelled = Metric(family.name, family.documentation, family.type, family.unit)
            labelled.samples = [
                s._replace(labels={"integration": self.integration, **s.labels}) for s in family.samples
            ]
            yield labelled


class _Window:
    """Requests this process sent in the last `window_s` seconds, by its own clock."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._sent: deque[float] = deque()

    def add(self, at: float) -> None:
        self._sent.append(at)

    def count(self, now: float) -> int:
        while self._sent and self._sent[0] <= now - self.window_s:
            self._sent.popleft()
        return len(self._sent)


class _StateCollector(Collector):
    """Gauges and counters read at scrape time from the daemon's health and the latest snapshot."""

    def __init__(self, health: DaemonHealth, client: CaptureClient, sources: list[str], window: _Window) -> None:
        self.health, self.client, self.sources, self.window = health, client, sources, window
        self.snapshot: Snapshot | None = None
        self.tally: SettledTally | None = None

    def describe(self) -> Iterator[Metric]:
        return iter(())  # values come at scrape time; nothing to check at registration

    def collect(self) -> Iterator[Metric]:
        yield from self._sources()
        yield from self._ledger()
        yield from self._api()

    def _sources(self) -> Iterator[Metric]:
        for name, key, text in READ_COUNTERS:
            family = CounterMetricFamily(f"{PREFIX}_{name}", text, labels=["source"])
            for source in self.sources:
                totals = self.health.read_totals.get(source)
                family.add_metric([source], totals[key] if totals else 0)
            yield family
        for name, state, text in SETTLED_COUNTERS:
            family = CounterMetricFamily(
                f"{PREFIX}_{name}", f"{text} Counted by source when a pass ends.", labels=["source"]
            )
            settled = self.tally.totals if self.tally else None
            for source in self.sources:
                family.add_metric([source], settled[(source, state)] if settled else 0)
            yield family
        last_pass = GaugeMetricFamily(
            f"{PREFIX}_last_pass_timestamp_seconds", "End of the source's last pass.", labels=["source"]
        )
        success = GaugeMetricFamily(
            f"{PREFIX}_last_success_timestamp_seconds",
            "End of the source's last pass that exited 0 (absent: none since the daemon started).",
            labels=["source"],
        )
        for source in self.sources:
            if (p := self.health.passes.get(source)) is not None:
                last_pass.add_metric([source], p.at)
            if (at := self.health.last_success.get(source)) is not None:
                success.add_metric([source], at)
        yield last_pass
        yield success

    def _ledger(self) -> Iterator[Metric]:
        snap = self.snapshot
        if snap is None:
            return
        entries = GaugeMetricFamily(
            f"{PREFIX}_entries", "Ledger entries by source and state.", labels=["source", "state"]
        )
        for source, counts in snap.report.by_source.items():
            for state, n in counts.items():
                entries.add_metric([source, state], n)
        yield entries
        yield GaugeMetricFamily(
            f"{PREFIX}_oldest_unsettled_age_seconds",
            "Age of the oldest entry not yet settled (pending, in flight, unknown, blocked); 0 when none.",
            value=snap.oldest_unsettled_age_s,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_blocked_entries",
            "Entries blocked by a 409: a person must resolve them.",
            value=snap.report.attention.blocked,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_ledger_snapshot_timestamp_seconds",
            "When the ledger figures above were read.",
            value=snap.taken_at,
        )

    def _learned_window(self) -> float:
        """The limiter's window once it has learned one (or was told it); else the metrics' own."""
        gate = self.client.rate_gate
        learned = gate.window_s if isinstance(gate, AdaptiveRateLimiter) else None
        return learned if learned is not None else self.window.window_s

    def _api(self) -> Iterator[Metric]:
        health = self.health
        for role in health.roles().values():  # a shared PostgreSQL ledger: leader or standby
            yield GaugeMetricFamily(
                f"{PREFIX}_leader",
                "1 while this daemon leads the integration (holds its lease), 0 while it stands by.",
                value=int(role["leads"]),
            )
        yield GaugeMetricFamily(
            f"{PREFIX}_ready",
            "1 when GET /info succeeded under credentials not refused since.",
            value=int(health.ready),
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_auth_failing",
            "1 while the API refuses the credentials in use.",
            value=int(health.auth_failed is not None),
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_delivery_halted_seconds",
            "How long an unavailable API has halted delivery (since the first request it did not answer); 0 while it delivers.",
            value=time.time() - health.outage_since if health.outage_since else 0.0,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_stalled_entries",
            "Entries of batches stopped by a non-retryable answer: they wait for "
            "`capture-sync replay` (or [daemon] retry_stalled_every).",
            value=health.stalled.entries,
        )
        if health.client is None:
            return
        limit = health.client.rate_limit
        yield GaugeMetricFamily(
            f"{PREFIX}_rate_limit_requests", "The client's rate_limit from GET /info: requests per window.", value=limit
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_rate_limit_window_seconds",
            "The window rate_limit counts in ([capture] rate_window_s, or as the limiter learned it; the spec does not say).",
            value=self._learned_window(),
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_rate_limit_remaining_requests",
            "rate_limit minus the requests this process sent in the last window, by its own clock: an estimate "
            "(the server's window and other users of the same client are not visible).",
            value=max(limit - self.window.count(time.time()), 0),
        )
        gate = self.client.rate_gate
        if isinstance(gate, AdaptiveRateLimiter):
            yield GaugeMetricFamily(
                f"{PREFIX}_rate_limit_pace_requests_per_second",
                "The pace the client-side limiter holds now (below rate_limit/window after a 429).",
                value=gate.rate,
            )
