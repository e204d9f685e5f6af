"""The documentation site builds in strict mode (mkdocs.yml), so `make test` fails on what a reader
would trip over: a link to a missing page or anchor, a page left out of the nav, a missing snippet.
The README is not part of the site, so its own links are checked here: each names a file of the
repository, and each `#anchor` a heading of the page it points into."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def test_the_site_builds_in_strict_mode_without_a_warning(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # mkdocs-material's banner about its successor
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    assert (tmp_path / "site" / "operations" / "index.html").exists()
    # a pipe in a table cell's code span, escaped for GitHub, is a plain pipe on the site
    assert "--requeue|--dismiss" in (tmp_path / "site" / "commands" / "index.html").read_text(encoding="utf-8")
    # docs/index.md includes the walkthrough script itself, not a copy that could drift
    assert "start_sandbox" in (tmp_path / "site" / "index.html").read_text(encoding="utf-8")


def _anchors(page: Path) -> set[str]:
    """The ids mkdocs gives the page's headings (the toc extension's slugify, as mkdocs.yml leaves it)."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {slugify(re.sub(r"[`*]", "", h), "-") for h in re.findall(r"^#+\s+(.+?)\s*$", text, re.MULTILINE)}


def test_every_link_of_the_readme_reaches_a_file_and_a_heading() -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", README.read_text(encoding="utf-8"))
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert any(link.startswith("docs/") for link in local), "the README no longer links into docs/"
    for link in local:
        path, _, anchor = link.partition("#")
        target = ROOT / path if path else README
        assert target.exists(), f"README links {link}: no such file"
        if anchor:
            assert anchor in _anchors(target), f"README links {link}: no such heading in {path or 'README.md'}"


def test_the_readme_stays_a_newcomers_page() -> None:
    """At most about 250 lines (issue 25): the reference lives in docs/."""
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 260
