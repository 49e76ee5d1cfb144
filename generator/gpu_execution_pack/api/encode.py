"""The metrics document in the API's shape and units, from Prometheus' answers.

The document holds the series asked for (``Params.series``: catalog.API_SERIES unless the request
names others) under their API names, in the catalog's order and the API's units, one entry per GPU
(GPU series) or per host (system series), each entry's values on the window's step grid.
"""

from __future__ import annotations

from typing import Any

import orjson

from gpu_execution_pack import catalog
from gpu_execution_pack.config import CLUSTER
from gpu_execution_pack.query.params import Params, Window, iso


def assemble(execution_id: str, params: Params, window: Window, answers: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """The response document from Prometheus' answers (``ExecutionMetrics.answers``), in the API's units."""
    by_name = {s.name: s for s in params.series}
    entries: dict[str, dict[tuple, dict[str, Any]]] = {s.api_name: {} for s in params.series}
    for result in answers:
        for r in result:
            series = by_name[r["metric"]["__name__"]]
            labels = {k: v for k, v in r["metric"].items() if k != "__name__"}
            entry = entries[series.api_name].setdefault(tuple(sorted(labels.items())), {"labels": labels, "values": []})
            entry["values"] += api_values(series, r["values"])
    return {
        **head(execution_id, params, window),
        "series": {
            s.api_name: {"unit": s.api_unit, "entries": [entries[s.api_name][k] for k in sorted(entries[s.api_name])]}
            for s in params.series
        },
    }


def head(execution_id: str, params: Params, window: Window) -> dict[str, Any]:
    """The document's keys before ``series``; ``cluster`` only where a cluster label is configured."""
    cluster = {} if params.cluster is None else {CLUSTER: params.cluster}
    return {
        "executionId": execution_id,
        **cluster,
        "start": iso(window.start),
        "end": iso(window.end),
        "step": params.step_text,
    }


def encode_values(series: catalog.Series, samples: list[list[float]]) -> bytes:
    """Samples in the API's unit as JSON pairs, without the list's brackets: a piece of an entry's values."""
    return orjson.dumps(api_values(series, samples))[1:-1]


def api_values(series: catalog.Series, samples: list[list[float]]) -> list[list[float | None]]:
    """[t, value] pairs in the series' API unit; NaN and infinities (which JSON cannot carry) as null."""
    return catalog.UNITS[series.api_unit].from_base_samples(samples)
