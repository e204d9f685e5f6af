"""Alerts (`[[alerts]]`): webhooks told when a condition of the daemon starts and when it clears.

Every command reads a config, and a config's `[[alerts]]` need only `_config`; the conditions, the
webhook sender and the daemon's `Alerts` (some 8 ms of imports) load when first asked for, so that a
`sync` does not pay for them. A broken import still raises, at that first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._config import CONDITIONS, Alert, AlertSettings, Condition, parse_alerts

if TYPE_CHECKING:
    from ._alerts import Alerts
    from ._conditions import Change, Snapshot, Watch
    from ._sender import SendPolicy, Webhook

_LOADED_LATER = {
    "Alerts": "._alerts",
    "Change": "._conditions",
    "Snapshot": "._conditions",
    "Watch": "._conditions",
    "SendPolicy": "._sender",
    "Webhook": "._sender",
}


def __getattr__(name: str) -> Any:
    module = _LOADED_LATER.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # asked once
    return value


__all__ = [
    "CONDITIONS",
    "Alert",
    "AlertSettings",
    "Alerts",
    "Change",
    "Condition",
    "SendPolicy",
    "Snapshot",
    "Watch",
    "Webhook",
    "parse_alerts",
]
