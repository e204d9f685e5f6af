"""The spec's synthetic test flow (`capture-sync check --flow`) and the gate `sync` and `run` pass."""

from ..flow_gate import flow_command, flow_gate
from ._record import Recorder
from ._steps import TITLES, FlowReport, Step, run_flow

__all__ = ["TITLES", "FlowReport", "Recorder", "Step", "flow_command", "flow_gate", "run_flow"]
