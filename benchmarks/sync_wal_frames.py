"""SQLite WAL frames per record of a whole `capture-sync sync`, by the B-tree each page belongs to.

    .venv/bin/python benchmarks/sync_wal_frames.py --records 30000

SQLite writes each page a transaction dirtied as one WAL frame: a 24-byte frame header (whose first
4 bytes are the page number) and the page, two `pwrite64` calls, and the checkpoint writes the page
again into the database file. The sync of the peers' contacts (a fresh sandbox child and ledger, no
rate limit) runs under `strace -f -xx -e trace=pwrite64`; each 24-byte write is a frame header, its
page named by the finished ledger's `dbstat` (a page freed and reused meanwhile is named as it ends).
`btree_writes.py` counts the same per pass for the ledger alone, in process, without strace.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from harness import CLI, sandbox, write_config

sys.path.insert(0, str(Path(__file__).with_name("peers")))
from contacts import generate  # benchmarks/peers is not a package

_PWRITE = re.compile(r'pwrite64\(\d+, "((?:\\x[0-9a-f]{2})*)"\.*, (\d+), \d+\)')
FRAME_HEADER = 24


def count(records: int, folder: Path) -> tuple[int, Counter[str], int]:
    """(pwrite64 calls, WAL frames by B-tree, the ledger's page size) of one sync of `records` contacts."""
    contacts, trace = folder / "contacts.csv", folder / "strace.txt"
    generate(contacts, records)
    with sandbox(folder / "sandbox") as api:
        config = write_config(folder, api, contacts)
        command = ["strace", "-f", "-xx", "-s", "4", "-e", "trace=pwrite64", "-o", str(trace)]
        done = subprocess.run([*command, str(CLI), "sync", "-c", str(config)], env=api.env(), capture_output=True)
        if done.returncode:
            raise SystemExit(f"the sync failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    calls, pages = 0, Counter[int]()
    with trace.open() as lines:
        for line in lines:
            if match := _PWRITE.search(line):
                calls += 1
                if int(match.group(2)) == FRAME_HEADER:
                    pages[int(match.group(1).replace("\\x", "")[:8], 16)] += 1
    with sqlite3.connect(next(folder.glob("*.sqlite3"))) as conn:
        owner = dict(conn.execute("SELECT pageno, name FROM dbstat").fetchall())
        page_size: int = conn.execute("PRAGMA page_size").fetchone()[0]
    frames: Counter[str] = Counter()
    for page, n in pages.items():
        frames[owner.get(page, "(free)")] += n
    return calls, frames, page_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=30_000)
    args = parser.parse_args()
    if shutil.which("strace") is None:
        raise SystemExit("strace is not installed (apt-get install strace)")
    with tempfile.TemporaryDirectory(prefix="capture-sync-wal-") as tmp:
        calls, frames, page_size = count(args.records, Path(tmp))
    total = sum(frames.values())
    print(f"{total / args.records:.2f} WAL frames per record, {calls / args.records:.2f} pwrite64 calls per record")
    # a bigger page is fewer frames (and calls) for more bytes: the bytes are printed beside them
    print(f"pages of {page_size} bytes: {total * page_size / args.records / 1024:.1f} KiB into the WAL per record")
    for name, n in frames.most_common():
        if n / args.records >= 0.005:
            print(f"  {name:<44} {n / args.records:.3f}")


if __name__ == "__main__":
    main()
