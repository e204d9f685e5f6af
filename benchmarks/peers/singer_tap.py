"""The Singer SDK peer's tap, as the SDK's documentation writes one: a `Tap` with one `Stream`
whose `get_records` reads the CSV and whose `post_process` hook normalises phones to E.164 with
`phonenumbers`. It writes SCHEMA, RECORD and STATE messages to stdout for the target
(singer_target.py). Full-table replication: no bookmark, so a re-run reads and sends everything.

    python singer_tap.py --config TAP_CONFIG.json | python singer_target.py --config TARGET_CONFIG.json
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import Any

from phones import e164
from singer_sdk import Stream, Tap
from singer_sdk import typing as th


class PersonsStream(Stream):
    """Each CSV row as an API person."""

    name = "persons"
    primary_keys = ("id",)
    schema = th.PropertiesList(
        th.Property("id", th.IntegerType, required=True),
        th.Property("name", th.StringType),
        th.Property("first_name", th.StringType),
        th.Property("last_name", th.StringType),
        th.Property("email", th.StringType),
        th.Property("phone", th.StringType),
        th.Property("company", th.StringType),
        th.Property("custom_fields", th.ObjectType(th.Property("plan", th.StringType))),
    ).to_dict()

    def get_records(self, context: dict | None) -> Iterable[dict[str, Any]]:
        with open(self.config["path"], newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                yield {
                    "id": int(row["id"]),
                    "name": f"{row['First']} {row['Last']}",
                    "first_name": row["First"],
                    "last_name": row["Last"],
                    "email": row["Email"],
                    "phone": row["Phone"],
                    "company": row["Company"],
                    "custom_fields": {"plan": row["Plan"]},
                }

    def post_process(self, row: dict[str, Any], context: dict | None = None) -> dict[str, Any] | None:
        """The phone in E.164 (benchmarks/peers/phones.py), or none."""
        row["phone"] = e164(row["phone"])
        return row


class TapContacts(Tap):
    """Contacts from one CSV file."""

    name = "tap-contacts"
    config_jsonschema = th.PropertiesList(th.Property("path", th.StringType, required=True)).to_dict()

    def discover_streams(self) -> list[Stream]:
        return [PersonsStream(self)]


if __name__ == "__main__":
    TapContacts.cli()
