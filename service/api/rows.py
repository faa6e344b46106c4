"""The row formats POST /v1/predict reads: procsift's own JSON rows and Parquet traces.

JSON: the rows `procsift top --once --json` and `procsift trace head --json` print (syscalls by
name in `syscall_counts`, plus the derived `syscalls`, `categories`, `insufficient`, `exited`)
and trace rows (`sys_<name>` and `cat_<category>` columns, as in a CSV or a DataFrame's
records). Derived fields are checked against the counts they derive from, not refused
(`syscalls`, `categories`/`cat_*`), or recomputed (`insufficient`, as on loading a trace).
Parquet: a trace file as `procsift record` writes it; only the columns the model reads are
decoded, and `insufficient` is recomputed from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, model_validator

from procsift.collector.schema import (
    FLOAT_COLUMNS, LABELS, SCHEMA_VERSION, Window, is_insufficient,
)
from procsift.collector.syscalls import CATEGORIES, category_of
from procsift.collector.traceio import TraceMeta
from procsift.service.api.schemas import WindowIn, _number

__all__ = ["WindowRow", "PredictRows", "RowsError", "Batch", "PARQUET_TYPE", "parquet_batch", "window_of",
           "document_rows"]

PARQUET_TYPE = "application/vnd.apache.parquet"
CategoryName = Literal.__getitem__(CATEGORIES)  # type: ignore[attr-defined]
_COUNT = Annotated[int, Field(ge=0, le=2**53), BeforeValidator(_number)]  # as WindowIn.syscall_counts
_LIMIT = 2**53  # counts, nanoseconds and bytes stay exact in a float64 below this


class RowsError(Exception):
    """A request body in a row format that cannot be read; `status` is the HTTP answer (4xx)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class WindowRow(WindowIn):
    """A Window row as procsift prints or stores it; derived fields are checked, not refused."""

    syscalls: _COUNT | None = Field(None, description="derived: the sum of the syscall counts")
    categories: dict[CategoryName, _COUNT] | None = Field(  # type: ignore[valid-type]
        None, description="derived: the syscall counts summed per category")
    insufficient: StrictBool | None = Field(
        None, description="derived: too quiet to judge; ignored, recomputed from the figures (as on loading a trace: "
                          "recordings made before the rule last changed carry the old flag)")
    exited: StrictBool = False
    label: Literal.__getitem__(LABELS) | None = None  # type: ignore[valid-type]
    source: str | None = Field(None, max_length=4096)

    @model_validator(mode="before")
    @classmethod
    def _wide_columns(cls, data: Any) -> Any:
        """Trace rows carry `sys_<name>` and `cat_<category>` columns: fold them into the mappings."""
        if not isinstance(data, dict) or not any(isinstance(k, str) and k[:4] in ("sys_", "cat_") for k in data):
            return data
        out: dict[str, Any] = {}
        counts: dict[str, Any] = {}
        cats: dict[str, Any] = {}
        for key, value in data.items():
            if isinstance(key, str) and key.startswith("sys_"):
                if value != 0:  # a trace row has a column for every syscall, mostly zeros
                    counts[key[4:]] = value
            elif isinstance(key, str) and key.startswith("cat_"):
                cats[key[4:]] = value
            else:
                out[key] = value
        if counts and out.get("syscall_counts"):
            raise ValueError("give syscall counts either as syscall_counts or as sys_* columns, not both")
        if counts or "syscall_counts" not in out:
            out["syscall_counts"] = counts
        if cats:
            if out.get("categories") is not None:
                raise ValueError("give categories either as categories or as cat_* columns, not both")
            out["categories"] = cats
        return out

    @model_validator(mode="after")
    def _derived_fields_agree(self) -> "WindowRow":
        total = sum(self.syscall_counts.values())
        if self.syscalls is not None and self.syscalls != total:
            raise ValueError(f"syscalls is {self.syscalls} but the syscall counts add up to {total}")
        if self.categories is not None:
            derived = dict.fromkeys(CATEGORIES, 0)
            for name, count in self.syscall_counts.items():
                derived[category_of(name)] += count
            bad = [c for c in CATEGORIES if self.categories.get(c, 0) != derived[c]]
            if bad:
                c = bad[0]
                raise ValueError(f"categories[{c!r}] is {self.categories.get(c, 0)} but the syscall counts "
                                 f"give {derived[c]}")
        return self


class PredictRows(BaseModel):
    """One or many windows, of one or many processes, in any of procsift's JSON row formats."""

    model_config = ConfigDict(extra="forbid")

    windows: list[WindowRow] = Field(min_length=1)


_FIELDS = tuple(f for f in WindowIn.model_fields if f != "syscall_counts")


def window_of(row: WindowIn) -> Window:
    """The internal Window a validated row stands for."""
    exited = bool(getattr(row, "exited", False))
    return Window(**{f: getattr(row, f) for f in _FIELDS}, syscalls=row.syscall_counts, exited=exited)


@dataclass(frozen=True)
class Batch:
    """Rows read column-wise: what the model reads, and who and when each row is."""

    frame: pd.DataFrame        # the model's row columns, one row per window
    pid: np.ndarray
    start_time: np.ndarray
    t_start: np.ndarray
    insufficient: np.ndarray   # bool

    def __len__(self) -> int:
        return len(self.pid)


_RANGES = {"pid": (0, 2**22), "start_time": (0, _LIMIT), "t_start": (0, _LIMIT), "dur_s": (1e-9, 3600.0),
           "nthreads": (0, 2**22)}


def _column(table: pa.Table, name: str) -> np.ndarray:
    col = table.column(name)
    kind = col.type
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)):
        raise RowsError(422, f"column {name!r} is {kind}, not numbers")
    if col.null_count:
        raise RowsError(422, f"column {name!r} has {col.null_count} empty value(s)")
    values = col.to_numpy()
    as_float = values.astype(np.float64, copy=False)
    lo, hi = _RANGES.get(name, (0, _LIMIT))
    bad = ~np.isfinite(as_float) | (as_float < lo) | (as_float > hi)
    if bad.any():
        i = int(np.argmax(bad))
        raise RowsError(422, f"row {i}: {name} is {values[i]}; it must be a number from {lo:g} to {hi:g}")
    return as_float if name in FLOAT_COLUMNS else values.astype(np.int64, copy=False)


def parquet_batch(body: bytes, columns: list[str], max_rows: int) -> Batch:
    """The windows of a Parquet trace body; RowsError (4xx) when it cannot be read or used."""
    try:
        pf = pq.ParquetFile(pa.BufferReader(body))
    except (pa.ArrowException, OSError, ValueError) as err:
        raise RowsError(400, f"body is not a readable Parquet file ({str(err).splitlines()[0]})") from err
    schema = pf.schema_arrow  # a property that rebuilds the schema on every access
    raw = (schema.metadata or {}).get(b"procsift")
    if raw is not None:
        try:
            meta = TraceMeta.from_json(raw, "body")
        except Exception as err:  # noqa: BLE001 - TraceError or anything its parser raises
            raise RowsError(422, f"the Parquet file's procsift metadata is unreadable ({err})") from err
        if meta.schema_version != SCHEMA_VERSION:
            raise RowsError(422, f"trace of schema version {meta.schema_version}; this procsift reads "
                                 f"version {SCHEMA_VERSION} (re-record it)")
    n = pf.metadata.num_rows
    if n == 0:
        raise RowsError(422, "the Parquet file holds no rows")
    if n > max_rows:
        raise RowsError(413, f"{n} windows; at most {max_rows} per request")
    wanted = sorted({*columns, "pid", "start_time", "t_start", "run_ns", "switches_in", "syscalls"})
    present = set(schema.names)
    missing = [c for c in wanted if c not in present]
    if missing:
        raise RowsError(422, f"missing column(s) {', '.join(missing[:5])}"
                             f"{f' and {len(missing) - 5} more' if len(missing) > 5 else ''} "
                             f"(not a procsift trace of schema {SCHEMA_VERSION})")
    try:
        table = pf.read(columns=wanted)
    except (pa.ArrowException, OSError, ValueError) as err:
        raise RowsError(400, f"body is not a readable Parquet file ({str(err).splitlines()[0]})") from err
    data = {c: _column(table, c) for c in wanted}
    return Batch(frame=pd.DataFrame({c: data[c] for c in columns}), pid=data["pid"],
                 start_time=data["start_time"], t_start=data["t_start"],
                 insufficient=np.asarray(is_insufficient(data["switches_in"], data["syscalls"], data["run_ns"]),
                                         dtype=bool))



def document_rows(app: Any) -> None:
    """Put PredictRows (and the models it uses) into the app's OpenAPI components: POST /v1/predict
    reads its body itself (JSON or Parquet), so FastAPI does not collect the schema on its own."""
    base = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = base()
            rows = PredictRows.model_json_schema(ref_template="#/components/schemas/{model}")
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components.update(rows.pop("$defs", {}))
            components["PredictRows"] = rows
        return app.openapi_schema  # type: ignore[no-any-return]

    app.openapi = openapi
