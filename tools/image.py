"""Build the capture-sync container image here, where no container registry is reachable.

    python tools/image.py build                     # FROM python:3.12-slim (pulled: needs a registry)
    python tools/image.py build --local-base        # FROM a Debian base made here with debootstrap
    python tools/image.py base                      # only make (or find) that local base

Users build the Containerfile with docker or podman as it is (docs/container.md). Here and in CI the
base comes from Debian's packages instead: debootstrap makes a bookworm root (minbase, python3,
python3-venv) from the mirror this machine's apt already uses, and `podman import` turns it into the
local image `localhost/capture-sync-base:bookworm-<recipe>`. Then `buildah bud --isolation chroot`
(root, no daemon, no user namespaces) builds the Containerfile FROM it. pip inside the build reaches
PyPI as the machine's own pip does: the machine's CA bundle (which trusts a TLS-inspecting proxy
where there is one) is lent to the build as the secret `ca`, never stored in a layer.

The root is made once and kept as a tarball under .cache/image/ (gitignored), named by the recipe
(suite, packages, mirror), so a second build skips debootstrap; the imported image is reused while
its tag matches, and buildah's layer cache keeps the dependency install while pyproject.toml is
unchanged (a change to the sources rebuilds only the project's own wheel). Runs as root (debootstrap, chroot builds); needs podman, buildah and
debootstrap (.ci/run installs them).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "image"
SUITE = "bookworm"
PACKAGES = ("python3", "python3-venv", "ca-certificates")
BASE_IMAGE = "localhost/capture-sync-base"  # tagged SUITE-recipe: a changed recipe makes a new one
IMAGE = "localhost/capture-sync"
TOOLS = ("podman", "buildah", "debootstrap")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")  # Debian's bundle, local CAs included


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None]


def version() -> str:
    """The project's version, from pyproject.toml: the image's org.opencontainers.image.version."""
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])


def _sources_entries(text: str, deb822: bool) -> Iterator[tuple[list[str], list[str], list[str]]]:
    """(URIs, suites, components) of each `deb` entry of one apt sources file."""
    if deb822:
        for stanza in re.split(r"\n\s*\n", text):
            fields: dict[str, str] = {}
            for line in stanza.splitlines():
                if not line.startswith("#") and ":" in line and not line[0].isspace():
                    key, _, value = line.partition(":")
                    fields[key.strip().lower()] = value.strip()
            if "deb" in fields.get("types", "").split() and fields.get("enabled", "yes").lower() != "no":
                yield (
                    fields.get("uris", "").split(),
                    fields.get("suites", "").split(),
                    fields.get("components", "").split(),
                )
        return
    for line in text.splitlines():
        words = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
        if len(words) >= 3 and words[0] == "deb":
            yield [words[1]], [words[2]], words[3:]


def debian_mirror(apt: Path = Path("/etc/apt")) -> str:
    """The URL this machine's apt fetches Debian `SUITE main` from: debootstrap uses the same mirror
    (never a host of our choosing). Raises SystemExit naming the files read when there is none."""
    files = [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*"))]
    for path in files:
        if (path.suffix not in (".list", ".sources") and path.name != "sources.list") or not path.is_file():
            continue
        for uris, suites, components in _sources_entries(path.read_text(encoding="utf-8"), path.suffix == ".sources"):
            if SUITE in suites and "main" in components:
                return uris[0].rstrip("/")
    raise SystemExit(f"no apt source for Debian {SUITE} main in {apt}/sources.list*: debootstrap needs a mirror")


def _recipe(mirror: str) -> str:
    return hashlib.sha256(json.dumps([SUITE, "minbase", PACKAGES, mirror]).encode()).hexdigest()[:12]


def _run(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    print("+", " ".join(args), file=sys.stderr, flush=True)
    return subprocess.run(args, check=True, text=True, **kwargs)  # type: ignore[call-overload, no-any-return]


def base_image() -> str:
    """The local Debian base, made (or found) as described at the top; returns its name."""
    mirror = debian_mirror()
    recipe = _recipe(mirror)
    name = f"{BASE_IMAGE}:{SUITE}-{recipe}"
    if subprocess.run(["podman", "image", "exists", name]).returncode == 0:
        return name
    tarball = CACHE / f"debian-{SUITE}-{recipe}.tar"
    if not tarball.is_file():
        _debootstrap(mirror, tarball)
    _run(
        "podman",
        "import",
        "--change",
        f"ENV=PATH={PATH}",
        "--change",
        "CMD=/bin/bash",
        str(tarball),
        name,
    )
    return name


def _debootstrap(mirror: str, tarball: Path) -> None:
    """A minimal bookworm root with python3, without apt's caches, packed as `tarball`."""
    CACHE.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="debootstrap-", dir=CACHE) as tmp:
        root = Path(tmp) / "root"
        _run("debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(root), mirror)
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for item in (root / cache).glob("*"):
                if item.is_file():
                    item.unlink()
        partial = tarball.with_suffix(".partial")
        _run("tar", "--numeric-owner", "-C", str(root), "-cf", str(partial), ".")
        partial.rename(tarball)  # only a whole tarball is ever found in the cache
    print(f"debootstrap: {tarball.name} in {time.monotonic() - started:.0f} s", file=sys.stderr)


def build(base: str | None, tag: str | None = None) -> str:
    """Build the Containerfile from the working tree; returns the image's name. `base` None: the
    Containerfile's default (python:3.12-slim), which needs a registry."""
    name = tag or f"{IMAGE}:{version()}"
    args = ["--build-arg", f"VERSION={version()}"] + (["--build-arg", f"BASE={base}"] if base else [])
    if CA_BUNDLE.is_file():  # pip in the build trusts what this machine's pip trusts (a TLS-inspecting proxy's CA)
        args += ["--secret", f"id=ca,src={CA_BUNDLE}"]
    # --format docker: the OCI image format has no HEALTHCHECK; Docker's keeps it. --force-rm: a failed
    # build leaves no working container behind.
    _run(
        "buildah",
        "bud",
        "--isolation",
        "chroot",
        "--format",
        "docker",
        "--layers",
        "--force-rm",
        *args,
        "-f",
        str(ROOT / "Containerfile"),
        "-t",
        name,
        str(ROOT),
    )
    return name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("base", help=f"make (or find) {BASE_IMAGE}")
    built = sub.add_parser("build", help="build the image from the working tree")
    built.add_argument("--local-base", action="store_true", help=f"FROM {BASE_IMAGE}, made here first")
    built.add_argument("--tag", help=f"the image's name (default {IMAGE}:VERSION)")
    args = parser.parse_args(argv)
    if missing := missing_tools():
        raise SystemExit(f"missing {', '.join(missing)}: apt-get install -y podman buildah debootstrap (as root)")
    if args.command == "base":
        print(base_image())
        return 0
    print(build(base_image() if args.local_base else None, args.tag))
    return 0


if __name__ == "__main__":
    sys.exit(main())
