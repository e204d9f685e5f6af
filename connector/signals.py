"""A stop request from SIGTERM or SIGINT, as an asyncio event the engine and the daemon watch."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from contextlib import contextmanager

from . import logs

log = logs.get_logger("capture_sync.daemon")


@contextmanager
def stop_on_signals(stop: asyncio.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set `stop`: the engine finishes the requests in hand, records them, returns."""
    loop = asyncio.get_running_loop()
    sigs = (signal.SIGTERM, signal.SIGINT)
    for sig in sigs:
        loop.add_signal_handler(sig, _on_signal, stop, sig)
    try:
        yield
    finally:
        for sig in sigs:
            loop.remove_signal_handler(sig)


def _on_signal(stop: asyncio.Event, sig: signal.Signals) -> None:
    log.info("stop requested", signal=sig.name)
    stop.set()
