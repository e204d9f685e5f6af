"""The example plugin under examples/: installed into the venv, found through its entry point,
listed by `capture-sync sources list`, and mappable to a capture input. The plugin kit's contract is
its own tests (examples/capture-sync-example-source/tests, which `make test` runs)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from connector.api.models import PersonInput
from connector.mapping import Mapping
from connector.plugins import build_source, source_types

CARD = "BEGIN:VCARD\nVERSION:4.0\nFN:{name}\nEMAIL;TYPE=work:{email}\nTEL:+1 415 555 01{n:02d}\nEND:VCARD\n"


def card(folder: Path, stem: str, n: int) -> None:
    (folder / f"{stem}.vcf").write_text(CARD.format(name=f"Person {n}", email=f"p{n}@example.com", n=n))


def test_the_entry_point_is_discovered_beside_the_builtins(example_plugin: str) -> None:
    types = source_types()
    assert {"csv", "jsonl", "sql", "http", "vcard"} <= set(types)
    assert types["vcard"].__module__ == "capture_sync_example_source"


def test_sources_list_shows_the_installed_plugin_and_its_options(example_plugin: str) -> None:
    cli = Path(sys.executable).parent / "capture-sync"
    out = subprocess.run(
        [str(cli), "sources", "list"], check=True, capture_output=True, text=True, timeout=60, env=os.environ
    ).stdout
    assert "vcard  (capture-sync-example-source, capture_sync_example_source:VCardSource)" in out
    assert "folder" in out and "required" in out
    for builtin in ("csv  (built-in", "jsonl  (built-in", "sql  (built-in", "http  (built-in"):
        assert builtin in out


def test_a_config_may_name_the_class_directly_and_its_records_map(example_plugin: str, tmp_path: Path) -> None:
    card(tmp_path, "ann", 7)
    source = build_source("cards", "capture_sync_example_source:VCardSource", {"folder": str(tmp_path)})
    mapping = Mapping.from_config(
        {
            "name": "fn",
            "email": {"field": "email", "transform": "lower"},
            "phone": {"field": "tel", "transform": "e164"},
        },
        where="sources.cards.mapping",
    )
    [record] = source.read(None)
    assert mapping.map(record.data) == PersonInput(name="Person 7", email="p7@example.com", phone="+14155550107")
