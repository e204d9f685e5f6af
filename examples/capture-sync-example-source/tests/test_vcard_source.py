"""The plugin kit's contract (connector.testing.SourceContract) over the vCard source, with every
hook implemented: what an author runs before trusting a plugin with a ledger."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from connector.testing import SourceContract

CARD = "BEGIN:VCARD\nVERSION:4.0\nFN:{name}\nEMAIL;TYPE=work:{email}\nTEL:+1 415 555 01{n:02d}\nEND:VCARD\n"


def card(folder: Path, stem: str, n: int) -> None:
    (folder / f"{stem}.vcf").write_text(CARD.format(name=f"Person {n}", email=f"p{n}@example.com", n=n))


class TestVCardSource(SourceContract):
    # Once the package is installed, its entry-point name "vcard" works too; the class path needs
    # only the folder on the import path (pyproject.toml's pytest `pythonpath`).
    source_type = "capture_sync_example_source:VCardSource"

    @pytest.fixture
    def source_options(self, tmp_path: Path) -> dict[str, Any]:
        """A source holding at least 3 records."""
        for n in range(1, 4):
            card(tmp_path, f"2024-01-0{n}-person", n)
        return {"folder": str(tmp_path)}

    def add_records(self, options: dict[str, Any]) -> None:
        """A card whose name sorts after the others: the source reads in file-name order."""
        card(Path(options["folder"]), "2024-01-09-person", 9)

    def invalid_options(self, options: dict[str, Any]) -> list[dict[str, Any]]:
        """Options validation must refuse: no folder, a folder that is not text."""
        return [{}, {"folder": 5}]

    def broken_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """A folder that does not exist: check() raises SourceError."""
        return {"folder": options["folder"] + "/missing"}

    def bad_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """A card that is not UTF-8, among the good ones: it comes as a BadRecord."""
        (Path(options["folder"]) / "2024-01-02-latin1.vcf").write_bytes("FN:J\u00fcrgen\n".encode("latin-1"))
        return options
