"""Print, one a line, the requirements pyproject.toml names: the runtime ones and those of the extras
given (`postgres,otel`), or with --build the build system's. The Containerfile installs these in a
layer of their own before it copies the sources, so a change to the sources alone reuses that layer.
Standard library only: it runs on the image's base python before anything is installed.

    python3 pyproject_requirements.py pyproject.toml [EXTRAS]
    python3 pyproject_requirements.py pyproject.toml --build
"""

import sys
import tomllib
from typing import Any


def requirements(pyproject: dict[str, Any], extras: str) -> list[str]:
    if extras == "--build":
        return list(pyproject["build-system"]["requires"])
    project = pyproject["project"]
    wanted = [e.strip() for e in extras.split(",") if e.strip()]
    unknown = sorted(set(wanted) - set(project.get("optional-dependencies", {})))
    if unknown:
        raise SystemExit(f"unknown extra {', '.join(unknown)} (known: {', '.join(project['optional-dependencies'])})")
    return [*project["dependencies"], *(r for e in wanted for r in project["optional-dependencies"][e])]


if __name__ == "__main__":
    with open(sys.argv[1], "rb") as fh:
        print("\n".join(requirements(tomllib.load(fh), sys.argv[2] if len(sys.argv) > 2 else "")))
