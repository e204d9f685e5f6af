"""Concurrent bulk load against a Capture API, for the sandbox's concurrency test and benchmark.

Half of every batch are identities all clients send at the same time (they race to create the same
canonical person), half are each client's own; every person carries its own idempotency_key.
Raw httpx with no retries, so every status the server answers is counted as it was.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

from .store import SandboxStore


@dataclass
class LoadResult:
    statuses: Counter[int] = field(default_factory=Counter)
    sent: int = 0
    successful: int = 0
    duplicates: int = 0
    failed: int = 0
    identities: set[str] = field(default_factory=set)
    duration_s: float = 0.0

    @property
    def persons_per_s(self) -> float:
        return self.sent / self.duration_s if self.duration_s else 0.0


def batch(client_no: int, request_no: int, size: int) -> list[dict[str, str]]:
    persons = []
    for p in range(size):
        shared = p % 2 == 0
        local = f"r{request_no}p{p}" if shared else f"c{client_no}r{request_no}p{p}"
        persons.append(
            {
                "name": f"Load {local}",
                "email": f"{local}@load.example.org",
                "idempotency_key": f"c{client_no}-r{request_no}-p{p}",
            }
        )
    return persons


async def run_bulk_load(
    base_url: str,
    credentials: list[tuple[str, str]],
    requests_per_client: int,
    persons_per_request: int,
    timeout_s: float = 120.0,
) -> LoadResult:
    """Every client sends its requests one after another; the clients run concurrently."""
    result = LoadResult()

    async def one_client(client_no: int, api_key: str, api_secret: str) -> None:
        headers = {"X-API-Key": api_key, "X-API-Secret": api_secret}
        async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=timeout_s) as http:
            for request_no in range(requests_per_client):
                persons = batch(client_no, request_no, persons_per_request)
                response = await http.post(
                    "/persons/bulk",
                    json={"persons": persons},
                    headers={"Idempotency-Key": f"load-c{client_no}-r{request_no}"},
                )
                result.statuses[response.status_code] += 1
                result.sent += len(persons)
                result.identities.update(p["email"] for p in persons)
                if response.status_code == 200:
                    data = response.json()["data"]
                    result.successful += len(data["successful"])
                    result.duplicates += len(data["duplicates"])
                    result.failed += len(data["failed"])

    started = time.perf_counter()
    await asyncio.gather(*(one_client(n, key, secret) for n, (key, secret) in enumerate(credentials)))
    result.duration_s = time.perf_counter() - started
    return result


def integrity_problems(store: SandboxStore, result: LoadResult, clients: int, requests: int, persons: int) -> list[str]:
    """What went wrong in a finished `run_bulk_load`, judged by the sandbox's own records: empty if
    every request succeeded, no person is missing, none was created twice, no key captured twice."""
    problems = []
    total = clients * requests * persons
    if result.statuses != {200: clients * requests}:
        problems.append(f"statuses {dict(result.statuses)}, expected only 200")
    if (result.successful, result.duplicates, result.failed) != (total, 0, 0):
        problems.append(f"results {result.successful}/{result.duplicates}/{result.failed}, expected {total}/0/0")
    stored = sorted(p["identity"] for p in store.persons())
    expected = sorted(f"email:{i}" for i in result.identities)
    if stored != expected:
        missing, extra = set(expected) - set(stored), len(stored) - len(set(stored))
        problems.append(
            f"{len(stored)} persons stored for {len(expected)} identities ({len(missing)} missing, {extra} doubled)"
        )
    created_twice = [i for i, n in store.creations_by_identity().items() if n != 1]
    if created_twice:
        problems.append(f"{len(created_twice)} identities created more than once")
    by_key = store.capture_counts_by_person_key()
    if len(by_key) != total or set(by_key.values()) != {1}:
        problems.append(f"{len(by_key)} per-person keys captured, expected {total} once each")
    return problems
