"""Write the metrics endpoint's golden default answers with the endpoint code of another source tree.

    PYTHONPATH=generator .venv/bin/python -m tests.golden.make_api_default /tmp/api-10efbb0/generator

Backfills a real Prometheus (the first ``prometheus`` on PATH) with this checkout's scenarios and
rules (``tests.api_golden``), has the given tree's endpoint answer each request in memory and
streamed, checks the two give the same bytes, and writes them under
``golden/api-default/prometheus-<major>/``. See tests/api_golden.py for why and how.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.prometheus import Prometheus
from tests import api_golden
from tests.conftest import major_version


def fetch(tree: Path, url: str, request: api_golden.Request) -> bytes:
    """``request`` answered by the endpoint of ``tree``, in memory and streamed: the bytes (the same)."""
    args = [json.dumps(api_golden.api_config(url)), json.dumps(api_golden.KEYS), json.dumps(api_golden.STREAMED)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run(
        [sys.executable, "-c", api_golden.FETCH, *args, request.as_json()],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{request.name}: the endpoint of {tree} failed:\n{proc.stderr}")
    in_memory, streamed = json.loads(proc.stdout)
    if in_memory["status"] != 200 or in_memory["body"] != streamed["body"] or not streamed["chunked"]:
        raise SystemExit(f"{request.name}: no 200, or the streamed answer differs: {in_memory['body'][:300]}")
    return in_memory["body"].encode()


def main(argv: list[str]) -> int:
    """Write every golden answer for the running Prometheus version; the one argument is a ``generator`` dir."""
    if len(argv) != 1 or not (Path(argv[0]) / "gpu_execution_pack").is_dir():
        print("usage: make_api_default GENERATOR_DIR (a tree holding gpu_execution_pack/)", file=sys.stderr)
        return 2
    tree = Path(argv[0]).resolve()
    major = major_version("prometheus")
    with tempfile.TemporaryDirectory() as scratch:
        server = Prometheus(Path(scratch))
        try:
            api_golden.load(server)
            for request in api_golden.REQUESTS:
                path = api_golden.golden_path(request.name, major)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(fetch(tree, server.url, request))
                print(f"wrote {path}")
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
