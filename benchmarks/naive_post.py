"""The overhead benchmark's baseline: read the CSV and post it in bulk batches of 100 with plain
httpx, 4 requests in flight (as the connector's default); no ledger, no mapping rules, no
validation, no retries. It prints how many persons the API took, so the run can be checked.

    CAPTURE_API_KEY=... CAPTURE_API_SECRET=... python benchmarks/naive_post.py CSV BASE_URL
"""

from __future__ import annotations

import asyncio
import csv
import json
import os
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

import httpx

BATCH = 100
CONCURRENCY = 4


def persons(path: str, phone: Callable[[str], str | None] = str) -> Iterator[dict[str, Any]]:
    """The CSV's rows as persons; `phone` normalises the phone (the peers' baseline uses E.164)."""
    with open(path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            yield {
                "name": f"{row['First']} {row['Last']}",
                "first_name": row["First"],
                "last_name": row["Last"],
                "email": row["Email"],
                "phone": phone(row["Phone"]),
                "company": row["Company"],
                "custom_fields": {"plan": row["Plan"]},
            }


async def post_once(http: httpx.AsyncClient, body: bytes) -> int:
    """Persons taken by one bulk request; anything but a 200 counts none (no retries here)."""
    response = await http.post(
        "/persons/bulk",
        content=body,
        headers={"Idempotency-Key": uuid.uuid4().hex, "Content-Type": "application/json"},
    )
    if response.status_code != 200:
        return 0
    data = response.json()["data"]
    return len(data["successful"]) + len(data["duplicates"])


Post = Callable[[httpx.AsyncClient, bytes], Awaitable[int]]


async def post_all(
    path: str,
    base_url: str,
    *,
    people: Callable[[str], Iterable[dict[str, Any]]] = persons,
    post: Post = post_once,
    timeout_s: float = 5.0,
) -> int:
    """Post `people(path)` in bulk batches of BATCH with CONCURRENCY in flight; the persons taken."""
    auth = {"X-API-Key": os.environ["CAPTURE_API_KEY"], "X-API-Secret": os.environ["CAPTURE_API_SECRET"]}
    queue: asyncio.Queue[bytes | None] = asyncio.Queue(CONCURRENCY)
    taken = 0
    limits = httpx.Limits(max_connections=CONCURRENCY)
    async with httpx.AsyncClient(base_url=base_url, headers=auth, limits=limits, timeout=timeout_s) as http:

        async def worker() -> None:
            nonlocal taken
            while (body := await queue.get()) is not None:
                took = await post(http, body)  # not `taken += await ...`: that reads `taken` before the await
                taken += took

        workers = [asyncio.create_task(worker()) for _ in range(CONCURRENCY)]
        batch: list[dict[str, Any]] = []
        for person in people(path):
            batch.append(person)
            if len(batch) == BATCH:
                await queue.put(json.dumps({"persons": batch}).encode())
                batch = []
        if batch:
            await queue.put(json.dumps({"persons": batch}).encode())
        for _ in workers:
            await queue.put(None)
        await asyncio.gather(*workers)
    return taken


if __name__ == "__main__":
    print(asyncio.run(post_all(sys.argv[1], sys.argv[2])))
