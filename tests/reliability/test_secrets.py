"""The secret scan every reliability test ends with (the `rel` fixture's teardown) finds a secret
wherever it lands: any file under the test's folders, at any depth and in binary files, and any
output. (tests/cli/test_secrets.py covers each CLI command; this covers the reliability runs.)"""

from __future__ import annotations


def test_the_scan_finds_a_secret_in_any_file_or_output(rel, tmp_path):
    scan = type(rel.scan)()  # a scan of its own: the planted secret must not fail this test's teardown
    scan.secrets.append("s3cr3t-planted")
    (tmp_path / "clean.log").write_text("nothing to see")
    (tmp_path / "deep" / "er").mkdir(parents=True)
    assert scan.leaks([tmp_path]) == []

    leaked = tmp_path / "deep" / "er" / "ledger.sqlite3-wal"
    leaked.write_bytes(b"\x00\x01page s3cr3t-planted \xff")
    elsewhere = rel.world_folder() / "runs.log"
    elsewhere.write_text("header: s3cr3t-planted\n")
    assert sorted(scan.leaks([tmp_path, elsewhere.parent])) == sorted([str(leaked), str(elsewhere)])
    assert scan.leaks([], "a log line with s3cr3t-planted") == ["output"]
    scan.outputs.append("stderr of a run: s3cr3t-planted")
    assert scan.leaks([]) == ["output"]
