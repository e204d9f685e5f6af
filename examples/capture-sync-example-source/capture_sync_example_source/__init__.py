"""An example capture-sync source plugin: a folder of vCard files, one contact per file."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import Field

from connector.source import BadRecord, ConfigPath, Record, Source, SourceError, SourceOptions

FIELDS = ("fn", "n", "email", "tel", "org", "title")


class VCardOptions(SourceOptions):  # unknown options are refused; ConfigPath: relative to the config
    folder: ConfigPath = Field(description="Folder of .vcf files; name new files so that they sort last.")


class VCardSource(Source[VCardOptions]):
    """A folder of vCard (.vcf) files, one contact per file, read in file-name order."""

    Options = VCardOptions

    def check(self) -> None:  # optional: `capture-sync check` and the plugin kit call it
        if not Path(self.options.folder).is_dir():
            raise SourceError(f"{self.options.folder} is not a folder")

    def columns(self) -> list[str]:  # optional: the fields every record has ("" when a card lacks one)
        return list(FIELDS)

    def read(self, state: Any | None) -> Iterator[Record | BadRecord]:
        # The state is the name of the last file read: everything after it is new.
        for path in sorted(Path(self.options.folder).glob("*.vcf")):
            if state is None or path.name > state:
                try:
                    text = path.read_text("utf-8")
                except UnicodeDecodeError as exc:  # this card is bad, not the folder: report it and go on
                    yield BadRecord(path.name, f"not valid UTF-8 ({exc.reason})", path.name, path.stem)
                    continue
                yield Record(path.stem, parse_vcard(text), path.name)


def parse_vcard(text: str) -> dict[str, str]:
    """FN, N, EMAIL, TEL, ORG and TITLE of one card (the first of each), e.g. `EMAIL;TYPE=work:a@b.c`."""
    fields = dict.fromkeys(FIELDS, "")
    for line in text.splitlines():
        name, colon, value = line.partition(":")
        key = name.split(";")[0].strip().lower()
        if colon and key in fields and not fields[key]:
            fields[key] = value.strip()
    return fields
