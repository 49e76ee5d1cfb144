"""How ``serve`` runs the app under uvicorn: the settings the tests run it with too."""

from __future__ import annotations

import copy
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp

# How much of a request's head (request line and headers) uvicorn reads before it gives up and closes
# the connection. Far above the app's own limit (app.MAX_HEADER_BYTES, 16 KiB), so that an oversized
# header, a 1 MB token say, gets the app's 431 JSON answer instead of a reset connection; past it
# uvicorn answers 400 and closes. It is also what one connection may make the server buffer.
MAX_REQUEST_HEAD_BYTES = 2 * 1024 * 1024


# How often a thread holding Python's interpreter lock is asked to let another run (Python's default:
# 5 ms). The endpoint converts and encodes long ranges in a worker thread; at 5 ms, each step of a
# quick request (a 401, /healthz) on the event loop could wait that long for the lock, several times.
SWITCH_INTERVAL_SECONDS = 0.0005

# With several workers each process builds its own app: these say from what (set by ``serve``).
CONFIG_ENV = "GPU_PACK_SERVE_CONFIG"
INSECURE_ENV = "GPU_PACK_SERVE_INSECURE_NO_AUTH"
FACTORY = "gpu_execution_pack.api.server:app_from_environment"


class QuietStreamAborts(logging.Filter):
    """Drops uvicorn's "Exception in ASGI application" for a stream the app cut on purpose.

    The app has logged why, as one warning (``stream.StreamAborted``); the traceback uvicorn adds
    reads as a crash of the server. Any other exception is still logged with its traceback.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and _only_aborts(record.exc_info[1]))


def _only_aborts(exc: BaseException | None) -> bool:
    from gpu_execution_pack.api.stream import StreamAborted

    if isinstance(exc, BaseExceptionGroup):  # raised through a task group
        return all(_only_aborts(e) for e in exc.exceptions)
    return isinstance(exc, StreamAborted)


def log_config() -> dict[str, Any]:
    """uvicorn's own logging settings, with QuietStreamAborts on its error logger (in every worker)."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["stream_aborts"] = {"()": f"{__name__}.QuietStreamAborts"}
    config["loggers"]["uvicorn.error"]["filters"] = ["stream_aborts"]
    return config


def uvicorn_config(
    app: ASGIApp | str, host: str, port: int, log_level: str = "info", workers: int = 1
) -> uvicorn.Config:
    """uvicorn's settings for ``app``: h11, whose head limit is settable, reading up to MAX_REQUEST_HEAD_BYTES.

    With ``workers`` over 1, ``app`` is FACTORY's import string: each worker process builds its app.
    """
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        log_config=log_config(),
        http="h11",
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD_BYTES,
        lifespan="on",
        workers=workers,
        factory=isinstance(app, str),
    )


def app_from_environment() -> Any:
    """A worker's app, from the config file and flag ``serve`` left in the environment."""
    from gpu_execution_pack.api.app import create_app
    from gpu_execution_pack.config import load_config

    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    return create_app(
        load_config(os.environ.get(CONFIG_ENV) or None), insecure_no_auth=os.environ.get(INSECURE_ENV) == "1"
    )


def run(app_or_factory: ASGIApp | str, host: str, port: int, workers: int) -> None:
    """Serve on ``host:port``, in one process or, with ``workers`` over 1, in that many (uvicorn's supervisor)."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    config = uvicorn_config(app_or_factory, host, port, workers=workers)
    if workers > 1:
        Multiprocess(config, sockets=[config.bind_socket()]).run()
    else:
        uvicorn.Server(config).run()
