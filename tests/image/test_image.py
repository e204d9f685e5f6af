"""The container image: built from the working tree on a Debian base made here (tools/image.py), then
its filesystem is unpacked and `capture-sync` run in it by chroot, as the image's own user with the
image's own environment (running containers may be refused on these machines; chroot is not).

Marked `image` and left out of a plain `pytest` (pyproject.toml): the build takes minutes and root.
`make image-test` runs it; CI runs that after `make test`, where a missing tool is a failure.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

pytestmark = pytest.mark.image

ROOT = Path(__file__).resolve().parents[2]
TAG = "localhost/capture-sync:image-test"
SAMPLE = ROOT / "connector" / "cli" / "sample-contacts.csv"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]

# Run inside the image: its marker environment (as packaging computes it) and each installed
# distribution with its requirements, so the closure of capture-sync's own can be computed here.
INVENTORY = """
import importlib.metadata as m, json, os, platform, sys
v = sys.implementation.version
env = dict(
    implementation_name=sys.implementation.name, os_name=os.name, sys_platform=sys.platform,
    implementation_version=f"{v.major}.{v.minor}.{v.micro}" + ("" if v.releaselevel == "final" else v.releaselevel[0] + str(v.serial)),
    platform_machine=platform.machine(), platform_release=platform.release(), platform_system=platform.system(),
    platform_version=platform.version(), python_full_version=platform.python_version(),
    platform_python_implementation=platform.python_implementation(),
    python_version=".".join(platform.python_version_tuple()[:2]),
)
print(json.dumps({"env": env, "dists": {d.metadata["Name"]: d.requires or [] for d in m.distributions()}}))
"""


@dataclass(frozen=True)
class Image:
    name: str
    config: dict[str, Any]  # the image's config: User, Env, Cmd, Labels, Healthcheck, ...
    rootfs: Path

    def command(self, *argv: str) -> list[str]:
        """`argv` inside the image's filesystem, as its user, in its working directory, with its env only."""
        cwd = self.config.get("WorkingDir") or "/"
        return [
            "chroot",
            f"--userspec={self.config['User']}",
            "--groups=",
            str(self.rootfs),
            "/usr/bin/env",
            "-i",
            "-C",
            cwd,
            *self.config["Env"],
            *argv,
        ]

    def run(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(*argv), capture_output=True, text=True, timeout=timeout)


def _fail_or_skip(why: str) -> None:
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"{why} (in CI the image test must run: .ci/run installs podman, buildah and debootstrap)")
    pytest.skip(why)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Image]:
    missing = [
        t for t in ("podman", "buildah", "debootstrap", "chroot", "unshare", "nsenter", "ip") if not shutil.which(t)
    ]
    if missing:
        _fail_or_skip(f"missing {', '.join(missing)}: apt-get install -y podman buildah debootstrap iproute2")
    if os.geteuid() != 0:
        _fail_or_skip("building on a debootstrapped base and chroot need root")
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "image.py"), "build", "--local-base", "--tag", TAG], check=True
    )
    inspected = json.loads(
        subprocess.run(
            ["buildah", "inspect", "--type", "image", TAG],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    config = json.loads(inspected["Config"])["config"]  # the image's config, as docker and Kubernetes read it
    rootfs = tmp_path_factory.mktemp("image") / "rootfs"
    rootfs.mkdir()
    container = subprocess.run(["podman", "create", TAG], check=True, capture_output=True, text=True).stdout.strip()
    try:  # a created container is never started: export gives its filesystem, flattened
        export = subprocess.Popen(["podman", "export", container], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "--numeric-owner", "-C", str(rootfs)], stdin=export.stdout, check=True)
        assert export.wait() == 0
    finally:
        subprocess.run(["podman", "rm", container], check=True, capture_output=True)
    yield Image(TAG, config, rootfs)
    shutil.rmtree(rootfs, ignore_errors=True)


def test_the_image_runs_as_a_non_root_user(image: Image) -> None:
    uid, _, gid = image.config["User"].partition(":")
    assert uid.isdigit() and int(uid) != 0, "a numeric user, so Kubernetes' runAsNonRoot can check it"
    assert gid.isdigit() and int(gid) != 0
    who = image.run("id", "-u")
    assert who.returncode == 0, who.stderr
    assert who.stdout.strip() == uid


def test_the_image_says_its_version_and_checks_its_health(image: Image) -> None:
    labels = image.config["Labels"]
    assert labels["org.opencontainers.image.version"] == PROJECT["version"]
    assert labels["org.opencontainers.image.title"] == "capture-sync"
    check = image.config["Healthcheck"]
    assert check and "/healthz" in " ".join(check["Test"]), image.config
    assert image.config["Entrypoint"] == ["capture-sync"]
    assert image.config["Cmd"][0] == "run" and "--http" in image.config["Cmd"]
    assert any(e.startswith("CAPTURE_SYNC_CONFIG=/etc/capture-sync/") for e in image.config["Env"])


def test_help_runs_inside_the_image(image: Image) -> None:
    done = image.run("capture-sync", "--help")
    assert done.returncode == 0, done.stderr
    for command in ("run", "sync", "demo", "status"):
        assert re.search(rf"\b{command}\b", done.stdout), done.stdout


def test_the_demo_inside_the_image_prints_its_summary(image: Image) -> None:
    done = image.run("capture-sync", "demo")
    assert done.returncode == 0, done.stdout + done.stderr
    with SAMPLE.open(encoding="utf-8") as fh:
        rows = sum(1 for _ in csv.DictReader(fh))
    assert f"Demo summary: {rows} contacts read" in done.stdout, done.stdout
    captured = re.search(r"^\W*captured\W+(\d+)\b", done.stdout, re.MULTILINE)
    failed = re.search(r"^\W*failed\W+(\d+)\b", done.stdout, re.MULTILINE)
    assert captured and int(captured.group(1)) > 0, done.stdout
    assert failed and int(failed.group(1)) == 0, done.stdout


# A deployment as docs/container.md describes it: the config and the credential files mounted under
# /etc/capture-sync, the ledger in the image's volume. The API is unreachable: /healthz says the
# daemon is alive, which is all the health check asks.
CONFIG = """\
[capture]
base_url = "http://127.0.0.1:9/api/v1/capture"
api_key_file = "credentials/api_key"
api_secret_file = "credentials/api_secret"

[ledger]
path = "/var/lib/capture-sync/capture-ledger.sqlite3"

[[sources]]
name = "people"
type = "csv"
schedule = "every 5m"
path = "people.csv"
primary_key = "id"

[sources.mapping]
first_name = "First"
email = "Email"
"""


def test_the_default_command_passes_the_images_health_check(image: Image, tmp_path: Path) -> None:
    """The image's own CMD and HEALTHCHECK, as written, in a network namespace of their own (so the
    fixed port 9464 is free): the health check, polled, passes once the daemon serves."""
    etc = image.rootfs / "etc" / "capture-sync"
    (etc / "credentials").mkdir(parents=True)
    (etc / "capture-sync.toml").write_text(CONFIG, encoding="utf-8")
    (etc / "people.csv").write_text("id,First,Email\n1,Ada,ada@example.com\n", encoding="utf-8")
    uid, _, gid = image.config["User"].partition(":")
    for name in ("api_key", "api_secret"):  # as a mounted secret: the image's user alone reads it
        secret = etc / "credentials" / name
        secret.write_text(f"test-{name}\n", encoding="utf-8")
        os.chown(secret, int(uid), int(gid))
        secret.chmod(0o400)
    check = image.config["Healthcheck"]["Test"]
    assert check[0] == "CMD", check
    log = (tmp_path / "daemon.log").open("w+", encoding="utf-8")
    daemon = subprocess.Popen(
        [
            "unshare",
            "--net",
            "sh",
            "-c",
            'ip link set lo up && exec "$@"',
            "sh",
            *image.command(*image.config["Entrypoint"], *image.config["Cmd"]),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        probe = ["nsenter", "-t", str(daemon.pid), "-n", *image.command(*check[1:])]
        deadline = time.monotonic() + 60
        while subprocess.run(probe, capture_output=True).returncode != 0:
            assert daemon.poll() is None, f"the daemon exited {daemon.returncode}:\n{_read(log)}"
            assert time.monotonic() < deadline, f"no healthy answer within 60 s:\n{_read(log)}"
            time.sleep(0.2)  # the poll's pace
    finally:
        daemon.terminate()
        code = daemon.wait(timeout=30)
    assert code == 0, _read(log)
    assert '"event": "ops.serving"' in _read(log)


def _read(log: Any) -> str:
    log.seek(0)
    return str(log.read())


def test_the_image_holds_only_the_runtime_dependencies(image: Image) -> None:
    assert image.run("python", "-c", "import pytest").returncode != 0, "pytest (a dev dependency) is in the image"
    done = image.run("python", "-c", INVENTORY)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    requires: dict[str, list[str]] = {canonicalize_name(name): reqs for name, reqs in found["dists"].items()}
    needed = _closure("capture-sync", requires, found["env"])
    assert set(requires) - needed == set(), "installed in the image, yet no runtime dependency of capture-sync"
    dev_only = {canonicalize_name(Requirement(r).name) for r in PROJECT["optional-dependencies"]["dev"]} - needed
    assert dev_only & set(requires) == set(), "a dev dependency is in the image"


def _closure(root: str, requires: dict[str, list[str]], env: dict[str, str]) -> set[str]:
    """The distributions `root` needs (no extras), following each requirement whose marker holds."""
    seen: set[tuple[str, str]] = set()
    todo = [(canonicalize_name(root), "")]
    while todo:
        name, extra = todo.pop()
        if (name, extra) in seen:
            continue
        seen.add((name, extra))
        for text in requires.get(name, []):
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({**env, "extra": extra}):
                todo += [(canonicalize_name(req.name), e) for e in ("", *req.extras)]
    return {name for name, _ in seen}
