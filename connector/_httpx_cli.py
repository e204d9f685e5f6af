"""httpx's command line, loaded only if something uses it.

`import httpx` imports `httpx._main`, its `httpx` command (click, pygments, rich's progress and
syntax modules), whenever click is installed, as it is here (uvicorn and sqlite-utils need it). A
sync imports httpx at start-up and never runs that command, yet paid for it on every run. So until
httpx is imported, `httpx._main` is a stand-in: `httpx.main` and any other name asked of it load the
real module then and answer from it, so whoever does use httpx's command line gets all of it.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

_NAME = "httpx._main"


def _real() -> types.ModuleType:
    if isinstance(sys.modules.get(_NAME), _StandIn):
        del sys.modules[_NAME]
    return importlib.import_module(_NAME)


class _StandIn(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # what the import system asks of any module (`__path__`): not a use
            raise AttributeError(name)
        return getattr(_real(), name)


def _main(*args: Any, **kwargs: Any) -> Any:
    return _real().main(*args, **kwargs)


def defer() -> None:
    """Put the stand-in in place, unless httpx (or its command line) is loaded already."""
    if "httpx" in sys.modules or _NAME in sys.modules:
        return
    stand_in = _StandIn(_NAME, "httpx's command line, loaded on first use (connector._httpx_cli)")
    stand_in.main = _main  # type: ignore[attr-defined]  # what `import httpx` takes from it
    sys.modules[_NAME] = stand_in
