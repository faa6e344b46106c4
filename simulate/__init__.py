"""Discrete-event simulation of scheduling policies from procsift's source papers.

Two models on one event calendar: the deadline paper's interactive system (deadline
scheduling against one- and two-level time slicing) and the FCF paper's web server
(FIFO, PS, SRPT and Fastest Connection First).
"""

from procsift.simulate.deadline import DeadlineScheduling
from procsift.simulate.deadline_experiments import (
    STRATEGIES,
    Capacity,
    DeadlineRun,
    capacity,
    table2,
    table3,
)
from procsift.simulate.deadline_experiments import run as run_deadline
from procsift.simulate.engine import Calendar
from procsift.simulate.errors import SimulationError
from procsift.simulate._machine import FETCH_MODES, MachineSpec
from procsift.simulate.internet import transfer_time
from procsift.simulate.timeslicing import TimeSlicing
from procsift.simulate.transactions import Category, Transaction, generate, paper_categories
from procsift.simulate.web import POLICIES, ServerSpec, WebResult
from procsift.simulate.web import simulate as simulate_web
from procsift.simulate.web_experiments import WebRow, size_mix, summarise, sweep
from procsift.simulate.web_load import WorkloadSpec

__all__ = [
    "Calendar", "SimulationError",
    "Category", "Transaction", "generate", "paper_categories", "MachineSpec", "FETCH_MODES",
    "DeadlineScheduling", "TimeSlicing", "STRATEGIES", "DeadlineRun", "run_deadline",
    "Capacity", "capacity", "table2", "table3",
    "POLICIES", "ServerSpec", "WorkloadSpec", "WebResult", "simulate_web", "transfer_time",
    "WebRow", "summarise", "size_mix", "sweep",
]
