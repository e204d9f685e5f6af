"""What the OpenTelemetry hooks (connector.tracing, docs/tracing.md) cost per Capture API request:
off (no OTEL_* variable: a shared no-op, opentelemetry not imported) and on (the SDK with an
in-memory exporter, export itself left out). A request is a batch of up to 100 records.

    .venv/bin/python benchmarks/tracing_overhead.py [--requests 200000]

Compare with `benchmarks/stages.py`, the CPU per record of the pipeline's own stages.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from connector import tracing


def per_request_ns(requests: int) -> float:
    """The best of five: one request span and one attempt, as the client makes them."""
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(requests):
            with tracing.request("capture_bulk", 100):
                tracing.attempted(1, 200)
        best = min(best, (time.perf_counter() - t0) / requests * 1e9)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    args = parser.parse_args()
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        del os.environ[name]
    off = per_request_ns(args.requests)
    imported = any(m.startswith("opentelemetry") for m in sys.modules)
    print(
        f"off: {off:,.0f} ns per request ({off / 100:.1f} ns per record at 100 per batch); opentelemetry imported: {imported}"
    )

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use(provider)
    on = per_request_ns(max(args.requests // 10, 1))
    print(
        f"on (SDK, in-memory exporter): {on / 1000:,.1f} us per request ({on / 100 / 1000:.2f} us per record at 100 per batch)"
    )


if __name__ == "__main__":
    main()
