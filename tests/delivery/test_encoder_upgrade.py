"""Upgrading to the compiled JSON encoder sends nothing again: a ledger written with the old encoder
(json.dumps) holds the content hashes of every person it sent, and reading the same records again
after the upgrade finds each one unchanged. The mapping is respelled between the passes (the same
payload from another spelling), so the records are mapped and their content compared, not skipped
as unchanged source rows."""

from __future__ import annotations

import importlib
import json
from typing import Any

from connector.api import CaptureClient, RetryPolicy
from connector.delivery import DeliverySettings, SourceJob, sync
from connector.ledger import Ledger
from connector.mapping import Mapping
from connector.source import Record, Source, SourceOptions

# where a sync's payloads are encoded (`Mapping.encoded_noting`)
mapping_module = importlib.import_module("connector.mapping")
SETTINGS = DeliverySettings(batch_size=10, concurrency=2)
QUICK = RetryPolicy(max_attempts=3, initial_backoff_s=0.01, max_backoff_s=0.02)


class Export(Source):
    class Options(SourceOptions):
        rows: list[dict[str, Any]]

    def read(self, state: Any) -> Any:
        for row in self.options.rows:
            yield Record(id=str(row["id"]), data=row, state={"exported": True})


ROWS = [
    {
        "id": i,
        "Name": name,
        "Email": f"p{i}@example.com",
        "Notes": notes,
        "Score": score,
        "Tags": tags,
    }
    for i, (name, notes, score, tags) in enumerate(
        [
            ("Zoë O'Brien", 'said "hi"\tand left\\', 1e-07, ["ü", "😀"]),
            ("Łukasz Żółw", "line one\nline two", 0.1 + 0.2, []),
            ("王小明", "\u2028separated\u2029", 12, ["a", "b"]),
            ("Ada", "</script>", 2**60, ["x"]),
            ("Grace", "plain", 1e16, ["nested", "list"]),
            ("Émile", "\\u0041 stays as written", -0.0, ["é"]),
        ]
        * 3
    )
]


def mapping(spelling: str) -> Mapping:
    table: dict[str, Any] = {
        "name": "Name" if spelling == "short" else {"field": "Name"},
        "email": "Email",
        "notes": "Notes",
        "custom_fields": {"score": "Score", "tags": "Tags"},
    }
    return Mapping.from_config(table, where="sources.export.mapping")


def json_dumps_encoder(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


async def test_a_ledger_written_with_the_old_encoder_sends_nothing_again(sandbox, tmp_path, monkeypatch) -> None:
    key, secret = sandbox.create_client(rate_limit=10_000)
    source = Export("export", Export.Options(rows=ROWS))
    with Ledger(tmp_path / "ledger.sqlite3", synchronous="NORMAL") as ledger:
        async with CaptureClient(sandbox.base_url, key, secret, retry_policy=QUICK) as client:
            with monkeypatch.context() as patch:
                patch.setattr(mapping_module, "encode_json", json_dumps_encoder)
                patch.setattr(mapping_module, "encode_person", json_dumps_encoder)
                patch.setattr(mapping_module, "encode_texts", json_dumps_encoder)
                first = await sync(ledger, client, [SourceJob("export", source, mapping("short"))], SETTINGS)
            assert (first.read, first.enqueued, first.captured) == (18, 18, 18)
            after = await sync(ledger, client, [SourceJob("export", source, mapping("long"))], SETTINGS)
    assert (after.read, after.unchanged, after.enqueued, after.sent) == (18, 18, 0, 0)
    assert len(sandbox.store.persons()) == 18
