"""Decode rounds captured into CUDA graphs, every node counted and attributed to a scope.

Uses `pools` and `kernels`; knows nothing of `reports`.
"""

from capture.count import CountedRound, capture_and_count, count_round, default_device
from capture.export import ExportError, NodeExport, summarize
from capture.graph_capture import CaptureError, capture_graph
from capture.params import STEPS, VARIANTS, RoundParams
from capture.round import DecodeRound
from capture.scopes import scope

__all__ = [
    "STEPS",
    "VARIANTS",
    "CaptureError",
    "CountedRound",
    "DecodeRound",
    "ExportError",
    "NodeExport",
    "RoundParams",
    "capture_and_count",
    "capture_graph",
    "count_round",
    "default_device",
    "scope",
    "summarize",
]
