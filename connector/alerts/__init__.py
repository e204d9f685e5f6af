"""Alerts (`[[alerts]]`): webhooks told when a condition of the daemon starts and when it clears."""

from ._alerts import Alerts
from ._conditions import Change, Snapshot, Watch
from ._config import CONDITIONS, Alert, AlertSettings, Condition, parse_alerts
from ._sender import SendPolicy, Webhook

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
