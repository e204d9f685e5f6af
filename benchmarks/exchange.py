"""The client's HTTP side alone: `CaptureClient.capture_bulk` of 100 persons against a server in
another process that answers every request at once with the same bulk result (100 echoed objects),
`--in-flight` requests out at a time; the figure is this process's CPU per request, so what the
client spends on the exchange (building the request, the pool, the socket, reading and parsing the
answer), without the sandbox's own turn. The cyclic collector runs at the threshold a run sets.

    .venv/bin/python benchmarks/exchange.py --requests 2000
    valgrind --tool=callgrind --callgrind-out-file=/dev/null .venv/bin/python benchmarks/exchange.py --requests 50
    (and --requests 250: the difference of the two instruction counts over 200 is the instructions per
    request, deterministic on a busy machine with PYTHONHASHSEED=0; the server child is not traced)
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import time

from connector.api import NO_RETRY, CaptureClient
from connector.logs import configure

PERSONS = 100
YOUNG_THRESHOLD = 10_000  # as a run sets it while it goes (engine._fewer_collections)


def _answer() -> bytes:
    objects = [
        {
            "index": i,
            "person_id": f"00000000-0000-4000-8000-{i:012d}",
            "idempotency_key": f"p-{i:040d}",
            "email": f"person{i}@example.test",
            "phone": f"+4420794600{i:02d}",
            "action": "created",
        }
        for i in range(PERSONS)
    ]
    data = {"successful": objects, "duplicates": [], "failed": [], "idempotent_replay": False}
    body = json.dumps(
        {"success": True, "statusCode": 200, "timestamp": "2026-11-27T08:00:00Z", "message": "ok", "data": data}
    ).encode()
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


async def _serve() -> None:
    """The server child: reads each request whole and answers it; prints its port."""
    reply = _answer()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                await reader.readexactly(length)
                writer.write(reply)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


async def _drive(port: int, requests: int, in_flight: int) -> float:
    persons = [
        {"name": f"Person {i}", "email": f"person{i}@example.test", "phone": f"+4420794600{i:02d}"}
        for i in range(PERSONS)
    ]
    async with CaptureClient(
        f"http://127.0.0.1:{port}/api/v1/capture",
        "key-bench",
        "secret-bench",
        allow_insecure_http=True,
        retry_policy=NO_RETRY,
        max_connections=in_flight,
    ) as client:
        body = json.dumps(persons, separators=(",", ":")).encode()
        queue = iter(range(requests))

        async def worker() -> None:
            for n in queue:
                await client.capture_bulk(body, f"bulk-{n:08d}", cost=PERSONS)

        for n in range(in_flight):  # the connections and the path made ready before the clock
            await client.capture_bulk(body, f"warm-{n:08d}", cost=PERSONS)
        t0 = time.process_time()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        return time.process_time() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--in-flight", type=int, default=4)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve())
        return
    server = subprocess.Popen([sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        configure("INFO")  # as a sync runs: the attempt lines are debug
        gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])  # and its collector's threshold
        cpu = asyncio.run(_drive(port, args.requests, args.in_flight))
    finally:
        server.terminate()
        server.wait()
    print(
        f"{args.requests} bulk requests of {PERSONS}, {args.in_flight} in flight: "
        f"{cpu / args.requests * 1e6:.0f} us CPU per request ({cpu / args.requests / PERSONS * 1e6:.1f} per record)"
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
