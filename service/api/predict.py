"""POST /v1/predict: labels for windows sent by a client; nothing is loaded from the request.

The body is JSON (procsift's own rows, see rows.py) or a Parquet trace
(`Content-Type: application/vnd.apache.parquet`); the answer is JSON, in the rows' order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.requests import ClientDisconnect

from procsift.collector.schema import Window
from procsift.collector.traceio import window_values, windows_to_columns
from procsift.models import Bundle, Smoother
from procsift.service.api.deps import BundleDep, SettingsDep
from procsift.service.api.rows import PARQUET_TYPE, Batch, PredictRows, RowsError, parquet_batch, window_of
from procsift.service.api.schemas import PredictResponse

__all__ = ["router", "predict_windows", "predict_batch"]

router = APIRouter(prefix="/v1", tags=["predict"])
SMALL_BATCH = 16  # up to this many windows, row by row (see predict_windows)


def predict_windows(bundle: Bundle, windows: list[Window], explain: bool = False) -> dict[str, Any]:
    """Per-window labels and per-process smoothed labels (plain data, the response body)."""
    cols = bundle.row_columns
    frame = windows_to_columns(windows, cols)
    batch = Batch(frame=frame, pid=np.array([w.pid for w in windows], dtype=np.int64),
                  start_time=np.array([w.start_time for w in windows], dtype=np.int64),
                  t_start=np.array([w.t_start for w in windows], dtype=np.float64),
                  insufficient=np.array([w.insufficient for w in windows], dtype=bool))
    if len(windows) <= SMALL_BATCH:
        # scikit-learn's per-call validation and a DataFrame cost ~1.5 ms; the daemon's per-row
        # numpy path gives the same probabilities (tested in tests/models) in ~0.1 ms.
        pairs = [bundle.predict_row(window_values(w, cols)) for w in windows]
        labels = np.array([lab for lab, _ in pairs], dtype=object)
        proba = np.stack([p for _, p in pairs])
        return _answer(bundle, batch, labels, proba, explain)
    return predict_batch(bundle, batch, explain)


def predict_batch(bundle: Bundle, batch: Batch, explain: bool = False) -> dict[str, Any]:
    """predict_windows for rows read column-wise (a Parquet body)."""
    labels, proba = bundle.predict_frame(batch.frame)
    return _answer(bundle, batch, labels, proba, explain)


def _answer(bundle: Bundle, batch: Batch, labels: np.ndarray, proba: np.ndarray, explain: bool) -> dict[str, Any]:
    names = list(bundle.labels)
    pid, start, t0 = batch.pid.tolist(), batch.start_time.tolist(), batch.t_start.tolist()
    insufficient = batch.insufficient.tolist()
    label_list = [str(x) for x in labels]
    rounded = np.round(proba, 4).tolist()
    out_windows = [{"pid": pid[i], "start_time": start[i], "t_start": t0[i], "label": label_list[i],
                    "probabilities": dict(zip(names, rounded[i])), "insufficient": insufficient[i]}
                   for i in range(len(pid))]
    if explain:
        for i, entry in enumerate(out_windows):
            e = bundle.explain_row(batch.frame.iloc[i])
            entry["explanation"] = {"steps": e.steps, "details": e.details}
    keys = list(zip(pid, start))
    smoother = Smoother()
    smoother.update_many(keys, label_list, proba, insufficient, order=np.argsort(batch.t_start, kind="stable").tolist())
    processes = []
    for key in dict.fromkeys(keys):
        label = smoother.label(key)
        mean = smoother.proba(key)
        st = smoother.state(key)
        prob = float(mean[names.index(label)]) if label is not None and mean is not None else 0.0
        processes.append({"pid": key[0], "start_time": key[1], "label": label,
                          "probability": round(prob, 4), "windows": st.windows if st is not None else 0})
    return {"model": bundle.kind, "window_s": bundle.window_s, "windows": out_windows, "processes": processes}


def _json_rows(body: bytes) -> list[Window]:
    try:
        rows = PredictRows.model_validate_json(body or b"null")
    except ValidationError as err:
        # the raw body is not echoed back (it need not even be text)
        raise RequestValidationError([{**{k: v for k, v in e.items() if not isinstance(v, bytes)},
                                       "loc": ("body", *e["loc"])} for e in err.errors(include_url=False)]) from err
    return [window_of(r) for r in rows.windows]


def _is_json(content_type: str) -> bool:
    return content_type in ("", "application/json") or content_type.endswith("+json")


_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"$ref": "#/components/schemas/PredictRows"}},
    PARQUET_TYPE: {"schema": {"type": "string", "format": "binary",
                              "description": "a trace file as `procsift record` writes it"}}}}}


@router.post("/predict", response_model=PredictResponse, openapi_extra=_BODY,
             responses={400: {"description": "body is not a readable Parquet file"},
                        413: {"description": "body or batch too large"},
                        415: {"description": "neither JSON nor Parquet"},
                        422: {"description": "a field, column or value is wrong (the message says which)"}})
async def predict(request: Request, bundle: BundleDep, settings: SettingsDep,
                  explain: bool = Query(False, description="add each window's decision path")) -> Response:
    """Label one or many windows (JSON rows or a Parquet trace); `?explain=true` adds each decision path."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != PARQUET_TYPE and not _is_json(content_type):
        raise HTTPException(415, f"content type {content_type!r}: send application/json or {PARQUET_TYPE}")
    try:
        body = await request.body()
    except ClientDisconnect:  # the body limit (limits.py) has answered 413 already, or the client left
        return Response(status_code=413)
    limit = settings.max_batch_rows

    def work() -> tuple[bytes, int]:
        if content_type == PARQUET_TYPE:
            result = predict_batch(bundle, parquet_batch(body, bundle.row_columns, limit), explain)
        else:
            windows = _json_rows(body)
            if len(windows) > limit:
                raise RowsError(413, f"{len(windows)} windows; at most {limit} per request")
            result = predict_windows(bundle, windows, explain)
        return orjson.dumps(result), len(result["windows"])

    try:
        content, n = await run_in_threadpool(work)
    except RowsError as err:
        raise HTTPException(err.status, str(err)) from err
    request.app.state.metrics.add("procsift_predictions_total", n)
    return Response(content, media_type="application/json")
