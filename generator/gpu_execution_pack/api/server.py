"""How ``serve`` runs the app under uvicorn: the settings the tests run it with too."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp

# How much of a request's head (request line and headers) uvicorn reads before it gives up and closes
# the connection. Far above the app's own limit (app.MAX_HEADER_BYTES, 16 KiB), so that an oversized
# header, a 1 MB token say, gets the app's 431 JSON answer instead of a reset connection; past it
# uvicorn answers 400 and closes. It is also what one connection may make the server buffer.
MAX_REQUEST_HEAD_BYTES = 2 * 1024 * 1024


def uvicorn_config(app: ASGIApp, host: str, port: int, log_level: str = "info") -> uvicorn.Config:
    """uvicorn's settings for ``app``: h11, whose head limit is settable, reading up to MAX_REQUEST_HEAD_BYTES."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        http="h11",
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD_BYTES,
        lifespan="on",
    )
