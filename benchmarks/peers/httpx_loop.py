"""The plain httpx baseline: read the CSV, normalise phones to E.164 with `phonenumbers`, post bulk
requests of 100 with 4 in flight (capture-sync's default). No ledger, no state, no validation
beyond the phone; a 429 is retried after its Retry-After with the same Idempotency-Key (a random
key per batch, so a re-run sends everything again under new keys). Prints the persons the API took.

It is benchmarks/naive_post.py's loop (the overhead figure's baseline, which keeps its meaning: no
phones, no retries) given the phone normalisation and the 429 retry the peers comparison needs.

    CAPTURE_API_KEY=... CAPTURE_API_SECRET=... python httpx_loop.py CSV BASE_URL
"""

from __future__ import annotations

import asyncio
import functools
import sys
import uuid
from pathlib import Path

import httpx
from phones import e164

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for naive_post
from naive_post import persons, post_all

MAX_ATTEMPTS = 10


async def post(http: httpx.AsyncClient, body: bytes) -> int:
    """Persons taken by one bulk request; a 429 waits its Retry-After and goes again, same key."""
    headers = {"Idempotency-Key": uuid.uuid4().hex, "Content-Type": "application/json"}
    for _ in range(MAX_ATTEMPTS):
        response = await http.post("/persons/bulk", content=body, headers=headers)
        if response.status_code == 429:
            await asyncio.sleep(float(response.headers.get("Retry-After", "1")))
            continue
        response.raise_for_status()
        data = response.json()["data"]
        return len(data["successful"]) + len(data["duplicates"])
    raise RuntimeError(f"still rate-limited after {MAX_ATTEMPTS} attempts")


if __name__ == "__main__":
    people = functools.partial(persons, phone=e164)
    print(asyncio.run(post_all(sys.argv[1], sys.argv[2], people=people, post=post, timeout_s=30)))
