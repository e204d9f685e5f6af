"""An example capture-sync source plugin: a folder of vCard files, one contact per file."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import Field

from connector.source import ConfigPath, Record, Source, SourceError, SourceOptions


class VCardOptions(SourceOptions):
    folder: ConfigPath = Field(description="Folder of .vcf files; name new files so that they sort last.")


class VCardSource(Source[VCardOptions]):
    """A folder of vCard (.vcf) files, one contact per file, read in file-name order."""

    Options = VCardOptions

    def check(self) -> None:
        if not Path(self.options.folder).is_dir():
            raise SourceError(f"{self.options.folder} is not a folder")

    def read(self, state: Any | None) -> Iterator[Record]:
        # The state is the name of the last file read: everything after it is new.
        for path in sorted(Path(self.options.folder).glob("*.vcf")):
            if state is None or path.name > state:
                yield Record(path.stem, parse_vcard(path.read_text("utf-8")), path.name)


def parse_vcard(text: str) -> dict[str, str]:
    """FN, N, EMAIL, TEL, ORG and TITLE of one card (the first of each), e.g. `EMAIL;TYPE=work:a@b.c`."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        name, colon, value = line.partition(":")
        key = name.split(";")[0].strip().upper()
        if colon and key in ("FN", "N", "EMAIL", "TEL", "ORG", "TITLE"):
            fields.setdefault(key.lower(), value.strip())
    return fields
