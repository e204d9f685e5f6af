"""The API secret appears nowhere: not in any command's stdout or stderr (the logs), not in the files it
writes (--output), not in the ledger."""

from __future__ import annotations

import json
from pathlib import Path


def ledger_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.glob("*.sqlite3*")) if "sandbox" not in p.name)


def test_every_command_keeps_the_secret_out_of_output_logs_and_ledger(kit, sandbox, tmp_path: Path) -> None:
    key, secret = sandbox.create_client("secret-test", rate_limit=1000)
    kit.credentials(tmp_path, key, secret)
    contacts = tmp_path / "contacts.csv"
    kit.contacts(contacts, [kit.contact(1), kit.contact(2), kit.contact(3, Email="not an email")])
    config = str(kit.config(tmp_path, sandbox.base_url, contacts))
    results = {}

    def run(*args: str, expect: int = 0, **kw) -> str:
        result = kit.run(*args, **kw)
        results[args] = result
        assert result.code == expect, (args, result.stdout, result.stderr)
        return result.stdout

    run("check", "-c", config)
    run("check", "-c", config, "--json")
    run("check", "-c", config, "--flow", "--yes", "-v")
    run("check", "-c", config, "--flow", "--yes", "--json")
    run("sync", "-c", config, "--dry-run")
    run("sync", "-c", config, "--dry-run", "--json", "--output", str(tmp_path / "preview.jsonl"))
    run("sync", "-c", config, "-v")  # DEBUG logs: the most there is to leak
    run("sync", "-c", config, "--json", "-v")
    run("runs", "list", "-c", config, "--json")
    run(
        "runs",
        "show",
        "-c",
        config,
        "last",
        "--format",
        "jsonl",
        "--show-contact-data",
        "--output",
        str(tmp_path / "run.jsonl"),
    )
    run("runs", "show", "-c", config, "last", "--format", "csv")
    run("state", "show", "-c", config, "--history", "--json")
    run("status", "-c", config)
    run("status", "-c", config, "--json")
    captured = [
        json.loads(line) for line in run("ledger", "list", "-c", config, "--state", "captured", "--json").splitlines()
    ]
    run("ledger", "list", "-c", config, "--state", "rejected")
    detail = json.loads(run("ledger", "show", "-c", config, captured[0]["key"], "--json"))
    run("ledger", "show", "-c", config, detail["batches"][0], "-v")
    run("ledger", "resolve", "-c", config, captured[0]["key"], "--dismiss", expect=2)  # nothing to resolve
    run("replay", "-c", config, "--include-failed", "-v")
    run("run", "--once", "-c", config, "-v")
    run("sources", "list")
    # The secret from the environment instead of a file, and a wrong one (401, exit 3).
    (tmp_path / "api_secret").unlink()
    run("check", "-c", config, env=kit.env(CAPTURE_API_SECRET=secret))
    wrong = secret[::-1]
    run("sync", "-c", config, "-v", expect=3, env=kit.env(CAPTURE_API_SECRET=wrong))
    # A secret written into the config file is refused without being echoed.
    bad = tmp_path / "bad.toml"
    bad.write_text(Path(config).read_text().replace("[capture]\n", f'[capture]\napi_secret = "{secret}"\n'))
    run("check", "-c", str(bad), expect=2)
    assert "api_secret: credentials are not accepted in the config file" in results[("check", "-c", str(bad))].stderr

    assert len({p["data"]["email"] for p in sandbox.store.persons()} & {"ada1@example.org", "ada2@example.org"}) == 2
    written = [(tmp_path / name).read_text() for name in ("preview.jsonl", "run.jsonl")]
    assert all(secret not in text for text in written)
    for args, result in results.items():
        for text in (result.stdout, result.stderr):
            assert secret not in text, args
            assert wrong not in text, args
    assert secret.encode() not in ledger_bytes(tmp_path)


def test_the_demo_keeps_its_secret_out_of_output_and_ledger(kit, tmp_path: Path) -> None:
    result = kit.run("demo", "--dir", str(tmp_path / "demo"), "-v")
    assert result.code == 0, result.stderr
    secret = (tmp_path / "demo" / "api_secret").read_text().strip()
    assert len(secret) >= 16
    assert secret not in result.stdout and secret not in result.stderr
    assert secret.encode() not in ledger_bytes(tmp_path / "demo")
    assert secret not in (tmp_path / "demo" / "capture-sync.toml").read_text()
