"""The dlt peer, as dlt's documentation writes a pipeline into an HTTP API: a `@dlt.resource`
reading the CSV, an `add_map` step normalising phones to E.164 (benchmarks/peers/phones.py), and a
`@dlt.destination(batch_size=100)` function posting each batch to POST /persons/bulk with
dlt's `requests` helper (retries 429 and 5xx, honouring Retry-After). Credentials come from dlt's
config injection (DESTINATION__CAPTURE__BASE_URL / __API_KEY / __API_SECRET).

What dlt does here: extract to local files, normalise (schema inference, types), then load the
files; the pipeline's state and its load packages live in `pipelines_dir`, so a failed load is
retried from its package by the next run. What it does not: validate emails or names (any string
passes), and the Idempotency-Key is a new random key per batch call (kept across the helper's own
retries of that call, not across runs).

    python dlt_pipeline.py CSV PIPELINES_DIR
"""

from __future__ import annotations

import csv
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import dlt
from dlt.common.schema import TTableSchema
from dlt.common.typing import TDataItems
from dlt.sources.helpers import requests
from phones import e164


@dlt.resource(name="persons", primary_key="id", write_disposition="append")
def contacts(path: str) -> Iterator[list[dict[str, Any]]]:
    """Rows as the API's persons, yielded a page at a time (dlt's advice for throughput)."""
    page: list[dict[str, Any]] = []
    with open(path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            page.append(
                {
                    "id": int(row["id"]),
                    "name": f"{row['First']} {row['Last']}",
                    "first_name": row["First"],
                    "last_name": row["Last"],
                    "email": row["Email"],
                    "phone": row["Phone"],
                    "company": row["Company"],
                    "custom_fields": {"plan": row["Plan"]},
                }
            )
            if len(page) == 1000:
                yield page
                page = []
    if page:
        yield page


def to_e164(person: dict[str, Any]) -> dict[str, Any]:
    """The `add_map` step: the phone in E.164, or none."""
    person["phone"] = e164(person["phone"])
    return person


@dlt.destination(batch_size=100, name="capture")
def capture(
    items: TDataItems,
    table: TTableSchema,
    base_url: str = dlt.config.value,
    api_key: str = dlt.secrets.value,
    api_secret: str = dlt.secrets.value,
) -> None:
    """One bulk request per batch of 100; an exception fails the job and dlt keeps it for a re-run."""
    persons = [{k: v for k, v in item.items() if k != "id"} for item in items]
    response = requests.post(
        f"{base_url}/persons/bulk",
        json={"persons": persons},
        headers={"X-API-Key": api_key, "X-API-Secret": api_secret, "Idempotency-Key": uuid.uuid4().hex},
    )
    response.raise_for_status()


def main(path: str, pipelines_dir: str) -> None:
    pipeline = dlt.pipeline(pipeline_name="capture_peer", destination=capture, pipelines_dir=pipelines_dir)
    info = pipeline.run(contacts(path).add_map(to_e164))
    info.raise_on_failed_jobs()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
