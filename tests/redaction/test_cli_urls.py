"""No source-URL secret reaches any output or the ledger, through the real `capture-sync` (a process):

- a sql source's database URL, malformed (`postgresql//reader:PW@host/db`, which no parser takes) or
  with its password in the query string, in `check`, `sync`, `sync --json` and the logs at every level;
- an http source's URL with `user:pw@` userinfo and `?token=...`: the ledger file (record ids, `where`,
  rejection reasons, saved states) and every output hold neither, and the next sync resumes from the
  saved state with the credential sent again (the upstream refuses a request without it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ..cli.conftest import CliKit
from ..origins.upstream import Upstream
from ..sources.test_sync_end_to_end import sync_config

PASSWORD = "pw-5ecret-db-81c"
TOKEN = "tok-5ecret-url-3e9"
RUNS = (["check"], ["check", "--json"], ["sync"], ["sync", "--json"], ["sync", "-v"], ["run", "--once", "-v"])


def ledger_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.glob("*.sqlite3*")))


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql//reader:{PASSWORD}@127.0.0.1:1/crm",
        f"postgresql+psycopg://reader@127.0.0.1:1/crm?password={PASSWORD}",
        f"postgresql+psycopg://reader:{PASSWORD}@127.0.0.1:1/crm?sslpassword={PASSWORD}",
    ],
)
def test_a_database_password_is_printed_by_no_command_at_any_log_level(
    kit: CliKit, sandbox: Any, tmp_path: Path, url: str
) -> None:
    config = sync_config(kit, tmp_path, sandbox, {"type": "sql", "url": url, "table": "people", "primary_key": "id"})
    outputs = []
    for args in RUNS:
        result = kit.run(*args, "-c", config)
        assert result.code != 0 or args[0] == "run", (args, result.stderr)
        outputs.append((args, result.stdout + result.stderr))
    for args, text in outputs:
        assert PASSWORD not in text, (args, text)
        assert "source 'signups'" in text or "signups" in text, (args, text)  # the source is named all the same
    assert any("source.unavailable" in text for _, text in outputs)
    assert PASSWORD.encode() not in ledger_bytes(tmp_path)


def test_the_ledger_and_outputs_hold_no_http_source_url_secret_and_the_next_sync_resumes(
    kit: CliKit, sandbox: Any, tmp_path: Path
) -> None:
    person = [{"id": n, "First": f"Ada{n}", "Last": "Lee", "Email": f"ada{n}@example.org"} for n in range(1, 5)]
    catalog: list[Any] = [person[0], "not an object", person[1], person[2]]  # two a page

    def pages(path: str) -> tuple[int, dict[str, str], Any]:
        if f"token={TOKEN}" not in path:
            return 401, {}, {"error": "no token"}
        page = int(path.split("page=")[1].split("&")[0]) if "page=" in path else 1
        return 200, {}, catalog[(page - 1) * 2 : page * 2]

    upstream = Upstream("127.0.0.1")
    try:
        upstream.route("/people", pages)
        url = upstream.base.replace("://", f"://reader:{TOKEN}@") + f"/people?token={TOKEN}"
        config = sync_config(kit, tmp_path, sandbox, {"type": "http", "url": url, "pagination": "page"})
        outputs = [kit.run(*args, "-c", config) for args in (["sync", "--json", "-v"], ["check", "--json"])]
        catalog.append(person[3])
        outputs += [kit.run("sync", "-v", "-c", config)]  # from the saved state (page 2), the token sent again
        outputs += [
            kit.run(*args, "-c", config)
            for args in (
                ["ledger", "list", "--state", "rejected", "--json"],
                ["ledger", "list", "--state", "captured"],
                ["state", "show", "--json"],
                ["runs", "show", "last", "--format", "jsonl"],
                ["status", "--json"],
            )
        ]
    finally:
        upstream.close()
    assert all(r.code == 0 for r in outputs), [(i, r.code, r.stderr) for i, r in enumerate(outputs) if r.code]
    assert sorted(p["data"]["email"] for p in sandbox.store.persons()) == [f"ada{n}@example.org" for n in range(1, 5)]
    assert "/people?page=***&token=*** " in outputs[0].stderr  # httpx's request line, as -v shows it
    assert not any(" 401 Unauthorized" in r.stderr for r in outputs)
    rejected = [json.loads(line) for line in outputs[3].stdout.splitlines()]
    assert [(e["record_id"], e["last_error"]) for e in rejected] == [
        (f"{upstream.base}/people?page=1#2", f"{upstream.base}/people item 2: not a JSON object")
    ]
    for result in outputs:
        for secret in (TOKEN, "reader:"):
            assert secret not in result.stdout and secret not in result.stderr
    assert TOKEN.encode() not in ledger_bytes(tmp_path) and b"reader" not in ledger_bytes(tmp_path)
