"""The chaos test's oracle can fail: a change upstream that the connector has not read is lost, and
an older version captured again after the newest is both doubled and stale."""

from __future__ import annotations

import random

from connector.api import PersonInput

from .upstream import CURSOR, MAPPING, Upstream, check_versions, version_figures


def test_the_oracle_finds_lost_doubled_and_stale_versions(rel, sandbox, tmp_path):
    env = rel.client(sandbox.store, rate_limit=100_000)
    upstream = Upstream.create(tmp_path / "contacts.csv", 40, random.Random(3))
    config = str(rel.config(tmp_path, sandbox.base_url, upstream.path, mapping=MAPPING, cursor=CURSOR))
    ledger = tmp_path / "ledger.sqlite3"
    assert rel.run("sync", "-c", config, env=env).code == 0
    first = check_versions(sandbox.store, upstream, ledger)
    assert first.records == first.captured_once == first.versions == upstream.written

    before = {record_id: upstream.expected(record_id) for record_id in upstream.rows}
    upstream.edit(0.25)
    changed = [r for r in upstream.rows if upstream.expected(r) not in (None, before.get(r))]
    unread = version_figures(sandbox.store, upstream, ledger)
    assert (unread.lost, unread.doubled, unread.stale) == (len(changed), 0, 0)

    assert rel.run("sync", "-c", config, env=env).code == 0
    settled = check_versions(sandbox.store, upstream, ledger)
    assert settled.captured_once == settled.records > first.records
    older = next(r for r in changed if r in before)
    client = sandbox.store.authenticate(env["CAPTURE_API_KEY"], env["CAPTURE_API_SECRET"])
    with sandbox.store.capture_session(client, "bulk", "a late retry") as session:
        session.capture(PersonInput(**before[older]))
    late = version_figures(sandbox.store, upstream, ledger)
    assert (late.lost, late.doubled, late.stale) == (0, 1, 1)
