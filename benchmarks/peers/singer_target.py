"""The Singer SDK peer's target, as the SDK's documentation writes one: a `Target` whose
`BatchSink` posts each batch to POST /persons/bulk. The batch size is the SDK's own
`batch_size_rows` setting (100 in the benchmark's config); the Idempotency-Key is the SDK's
`batch_id` (a random GUID per batch). Retries: a `requests` session with urllib3's `Retry` on 429
and 5xx, honouring Retry-After, the usual pattern for an HTTP target (the SDK ships retry logic
for taps' REST streams, none for sinks).

What the SDK does for the target: validates each record against the stream's JSON Schema and
emits STATE once the batches holding its records are drained. What it does not: keep anything
durable of its own (a re-run starts from the state the orchestrator saved, here none), or validate
beyond the schema (any string is an email).

    python singer_tap.py --config TAP_CONFIG.json | python singer_target.py --config TARGET_CONFIG.json
"""

from __future__ import annotations

import requests
from requests.adapters import HTTPAdapter
from singer_sdk import Target
from singer_sdk import typing as th
from singer_sdk.sinks import BatchSink
from urllib3.util.retry import Retry


def _session(api_key: str, api_secret: str) -> requests.Session:
    """One keep-alive session for the sink's life; POST retried too (the key makes that safe)."""
    retry = Retry(
        total=8,
        backoff_factor=0.5,
        status_forcelist=(429, 500, 502, 503, 504),
        allowed_methods=None,
        respect_retry_after_header=True,
    )
    session = requests.Session()
    session.mount("http://", HTTPAdapter(max_retries=retry))
    session.headers.update({"X-API-Key": api_key, "X-API-Secret": api_secret})
    return session


class PersonsSink(BatchSink):
    """Each batch of `batch_size_rows` records becomes one bulk request."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self._http = _session(self.config["api_key"], self.config["api_secret"])

    def process_batch(self, context: dict) -> None:
        persons = [{k: v for k, v in record.items() if k != "id"} for record in context.get("records", [])]
        if not persons:
            return
        response = self._http.post(
            f"{self.config['base_url']}/persons/bulk",
            json={"persons": persons},
            headers={"Idempotency-Key": context["batch_id"]},
            timeout=30,
        )
        response.raise_for_status()

    def clean_up(self) -> None:
        self._http.close()


class TargetCapture(Target):
    """Persons into the Capture API."""

    name = "target-capture"
    config_jsonschema = th.PropertiesList(
        th.Property("base_url", th.StringType, required=True),
        th.Property("api_key", th.StringType, required=True, secret=True),
        th.Property("api_secret", th.StringType, required=True, secret=True),
    ).to_dict()
    default_sink_class = PersonsSink


if __name__ == "__main__":
    TargetCapture.cli()
