"""The collector: per-process Window rows from eBPF (bcc) tracepoints, or /proc when BPF can't load."""

from procsift.collector.errors import (
    AccessDenied, BPFUnavailable, ProcessGone, ProcsiftError, TraceError,
)
from procsift.collector.schema import LABELS, SCHEMA_VERSION, Window
from procsift.collector.traceio import Trace, TraceMeta, read_trace, windows_to_frame, write_trace

__all__ = [
    "AccessDenied", "BPFUnavailable", "ProcessGone", "ProcsiftError", "TraceError",
    "LABELS", "SCHEMA_VERSION", "Window", "Trace", "TraceMeta", "read_trace",
    "windows_to_frame", "write_trace",
]
