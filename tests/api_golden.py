"""The data and requests of the metrics endpoint's golden answers: the default answer (no ``series``
parameter) as the endpoint gave it before the activity series existed, byte for byte.

The goldens under GOLDEN_DIR were written by the endpoint's code as it was at commit 10efbb0 (before
the ``series`` parameter), reading the data this module backfills; test_api_golden.py has the
current code answer the same requests on the same data and compares the bytes (test_api_series.py; on the
goldens' own series only, where the default answer has gained a series since: a series added to the
contract needs no new golden, and `make golden` leaves these alone). To write them again
(from the repository root, with Prometheus 2.x first on PATH, then again with 3.x first):

    git archive 10efbb0 generator | tar -x -C /tmp/api-10efbb0
    PYTHONPATH=generator .venv/bin/python -m tests.golden.make_api_default /tmp/api-10efbb0/generator

The data ends at a fixed time, and the harness backfills every recorded series at the same instants on
every run (one group name and relative file for every round), so every byte of the answers (times
included) is the same each time;
Prometheus' time retention counts from its newest block, not from the clock, so old data stays.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

from gpu_execution_pack.config import Config
from gpu_execution_pack.rules.files import all_groups
from gpu_execution_pack.scenario import library
from gpu_execution_pack.scenario.model import Scenario
from gpu_execution_pack.scenario.render import Renderer

from harness.prometheus import Prometheus

END = 1_767_225_600  # 2026-01-01T00:00:00Z: where the backfilled data ends
GOLDEN_DIR = Path(__file__).resolve().parent / "golden" / "api-default"
ADMIN = "admin-key-0123456789"
RESEARCH = "research-key-0123456789"
KEYS = {ADMIN: "*", RESEARCH: "research"}
# The streamed path is taken for any window over STREAM_POINTS points; lowered so these short windows
# are streamed, in chunks of an odd size so that stitching is exercised.
STREAMED = {"STREAM_POINTS": 1, "CHUNK_POINTS": 37}


def scenarios() -> tuple[Scenario, ...]:
    """A hung collective beside a tensor-core job (3 GPUs on h19), and an FP32 job exporting the SM fields:
    every activity series is recorded in the data, and the default answer must still leave them out."""
    return (library.hung_collective(), library.fp32_job())


def load(server: Prometheus) -> int:
    """Backfill ``scenarios()`` (their raw series and every recording rule) to end at END; their start."""
    cfg = Config()
    start = END - max(s.window_minutes for s in scenarios()) * 60
    server.load([r for s in scenarios() for r in Renderer(s, cfg).all_series()], all_groups(cfg), start, END)
    return start


def api_config(url: str) -> dict:
    """The ``api`` section the endpoint is run with: its ``lookback`` reaches back to END whatever the date."""
    days = math.ceil((time.time() - END) / 86400) + 30
    return {"prometheus_url": url, "lookback": f"{days}d"}


@dataclass(frozen=True)
class Request:
    """One golden request: its file name, the execution, the key, and the query parameters."""

    name: str
    execution_id: str
    key: str
    params: dict[str, str]

    def as_json(self) -> str:
        return json.dumps({"execution_id": self.execution_id, "key": self.key, "params": self.params})


REQUESTS = (
    Request("hung-0024", "hung-0024", ADMIN, {}),  # the default answer: no parameter at all
    Request("hung-0024-research", "hung-0024", RESEARCH, {}),  # scoped to a tenant: its hosts only
    Request("tensor-0025-1m", "tensor-0025", ADMIN, {"step": "1m"}),
    Request("fp32-0026", "fp32-0026", ADMIN, {}),
    Request(
        "fp32-0026-window",
        "fp32-0026",
        RESEARCH,
        {"start": "2025-12-31T23:10:00Z", "end": "2025-12-31T23:40:00Z", "step": "30s"},
    ),
)


def golden_path(name: str, prometheus_major: int) -> Path:
    """Where a request's golden answer lies, for the Prometheus major version that served the data."""
    return GOLDEN_DIR / f"prometheus-{prometheus_major}" / f"{name}.json"


# Run by ``python -c`` with PYTHONPATH at an endpoint's source tree: answers one request in memory,
# then streamed, and writes both answers' bytes (with their statuses) as JSON to stdout.
FETCH = """
import json, sys
from starlette.testclient import TestClient
from urllib.parse import quote
from gpu_execution_pack.api import metrics
from gpu_execution_pack.api.app import PATH, create_app
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.query import execution

api, keys, streamed, request = (json.loads(a) for a in sys.argv[1:5])
out = []
for stream in (False, True):
    if stream:
        metrics.STREAM_POINTS, execution.CHUNK_POINTS = streamed["STREAM_POINTS"], streamed["CHUNK_POINTS"]
    with TestClient(create_app(config_from_mapping({"api": api}), keys)) as client:
        r = client.get(
            PATH.format(execution_id=quote(request["execution_id"], safe="")),
            params=request["params"],
            headers={"Authorization": "Bearer " + request["key"]},
        )
    out.append({"status": r.status_code, "body": r.content.decode(), "chunked": "content-length" not in r.headers})
json.dump(out, sys.stdout)
"""
