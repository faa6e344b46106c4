"""POST /v1/predict: labels for windows sent by a client; nothing is loaded from the request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from fastapi import APIRouter, HTTPException, Query, Request, status
from fastapi.responses import JSONResponse

from procsift.collector.schema import Window
from procsift.collector.traceio import windows_to_columns
from procsift.models import RAW_COLUMNS, Bundle, Smoother
from procsift.service.api.deps import BundleDep, SettingsDep
from procsift.service.api.schemas import PredictRequest, PredictResponse, WindowIn

__all__ = ["router", "predict_windows"]

router = APIRouter(prefix="/v1", tags=["predict"])
_FIELDS = tuple(f for f in WindowIn.model_fields if f != "syscall_counts")
SMALL_BATCH = 16  # up to this many windows, row by row (see predict_windows)


def _window(m: WindowIn) -> Window:
    return Window(**{f: getattr(m, f) for f in _FIELDS}, syscalls=m.syscall_counts)


def _record(w: Window, cols: list[str]) -> dict[str, float]:
    """One window as the model's input columns (what windows_to_columns gives, for one row)."""
    cats = w.categories() if any(c.startswith("cat_") for c in cols) else {}
    out: dict[str, float] = {}
    for c in cols:
        if c == "syscalls":
            out[c] = w.syscalls_total
        elif c == "insufficient":
            out[c] = w.insufficient
        elif c.startswith("cat_"):
            out[c] = cats[c[4:]]
        elif c.startswith("sys_"):
            out[c] = w.syscalls.get(c[4:], 0)
        else:
            out[c] = getattr(w, c)
    return out


class _FrameRows:
    """Row i of a frame on demand (only `?explain=true` reads them)."""

    def __init__(self, frame: Any) -> None:
        self.frame = frame

    def __getitem__(self, i: int) -> Mapping[str, Any]:
        row: Mapping[str, Any] = self.frame.iloc[i]
        return row


def predict_windows(bundle: Bundle, windows: list[Window], explain: bool = False) -> dict[str, Any]:
    """Per-window labels and per-process smoothed labels (plain data, the response body)."""
    cols = sorted({*bundle.input_columns, *RAW_COLUMNS, "syscalls", "switches_in"})
    if len(windows) <= SMALL_BATCH:
        # scikit-learn's per-call validation and a DataFrame cost ~1.5 ms; the daemon's per-row
        # numpy path gives the same probabilities (tested in tests/models) in ~0.1 ms.
        records: list[Mapping[str, Any]] = [_record(w, cols) for w in windows]
        pairs = [bundle.predict_row(r) for r in records]
        labels = np.array([lab for lab, _ in pairs], dtype=object)
        proba = np.stack([p for _, p in pairs])
    else:
        frame = windows_to_columns(windows, cols)
        labels, proba = bundle.predict_frame(frame)
        records = _FrameRows(frame)
    names = list(bundle.labels)
    rounded = np.round(proba, 4).tolist()
    out_windows = []
    for i, w in enumerate(windows):
        entry: dict[str, Any] = {"pid": w.pid, "start_time": w.start_time, "t_start": w.t_start,
                                 "label": str(labels[i]), "probabilities": dict(zip(names, rounded[i])),
                                 "insufficient": w.insufficient}
        if explain:
            e = bundle.explain_row(records[i])
            entry["explanation"] = {"steps": e.steps, "details": e.details}
        out_windows.append(entry)
    smoother = Smoother()
    counts: dict[tuple[int, int], int] = {}
    for i in sorted(range(len(windows)), key=lambda j: windows[j].t_start):
        key = (windows[i].pid, windows[i].start_time)
        smoother.update(key, str(labels[i]), proba[i], windows[i].insufficient)
        counts[key] = counts.get(key, 0) + 1
    processes = []
    for key, n in counts.items():
        label = smoother.label(key)
        mean = smoother.proba(key)
        prob = float(mean[names.index(label)]) if label is not None and mean is not None else 0.0
        processes.append({"pid": key[0], "start_time": key[1], "label": label,
                          "probability": round(prob, 4), "windows": n})
    return {"model": bundle.kind, "window_s": bundle.window_s, "windows": out_windows, "processes": processes}


@router.post("/predict", response_model=PredictResponse,
             responses={400: {"description": "body is not parseable JSON"},
                        413: {"description": "body or batch too large"}})
def predict(request: Request, body: PredictRequest, bundle: BundleDep, settings: SettingsDep,
            explain: bool = Query(False, description="add each window's decision path")) -> JSONResponse:
    """Label one or many windows; `?explain=true` adds the decision path of each."""
    if len(body.windows) > settings.max_batch_rows:
        raise HTTPException(413,
                            f"{len(body.windows)} windows; at most {settings.max_batch_rows} per request")
    result = predict_windows(bundle, [_window(m) for m in body.windows], explain)
    request.app.state.metrics.add("procsift_predictions_total", len(body.windows))
    return JSONResponse(result)
