"""An async client for Prometheus' query API, with errors the endpoint can answer with."""

from __future__ import annotations

from typing import Any

import httpx


class PrometheusError(Exception):
    """Prometheus could not answer: ``status`` is 502 (unreachable, refused, failed) or 504 (too slow)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class PrometheusClient:
    """``instant`` and ``range`` queries against one Prometheus; reuse it across requests."""

    def __init__(self, url: str, timeout: float = 30.0, transport: httpx.AsyncBaseTransport | None = None):
        self.url = url.rstrip("/")
        self.client = httpx.AsyncClient(base_url=self.url, timeout=timeout, transport=transport)

    async def close(self) -> None:
        await self.client.aclose()

    async def instant(self, query: str, at: float | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"query": query}
        if at is not None:
            params["time"] = at
        return await self._get("/api/v1/query", params)

    async def range(self, query: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        return await self._get("/api/v1/query_range", {"query": query, "start": start, "end": end, "step": step})

    async def status_config(self) -> str:
        """Prometheus' loaded configuration, as the YAML text ``/api/v1/status/config`` returns."""
        try:
            response = await self.client.get("/api/v1/status/config")
            body = response.json()
            return str(body["data"]["yaml"])
        except httpx.TimeoutException:
            raise PrometheusError(504, f"Prometheus at {self.url} did not answer in time") from None
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            raise PrometheusError(502, f"Prometheus at {self.url} did not serve its configuration") from None

    async def _get(self, path: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        try:
            response = await self.client.get(path, params=params)
        except httpx.TimeoutException:
            raise PrometheusError(504, f"Prometheus at {self.url} did not answer in time") from None
        except httpx.HTTPError as err:
            raise PrometheusError(502, f"Prometheus at {self.url} is unreachable: {type(err).__name__}") from None
        try:
            body = response.json()
        except ValueError:
            raise PrometheusError(
                502, f"Prometheus at {self.url} answered {response.status_code} without JSON"
            ) from None
        if body.get("status") != "success":
            raise PrometheusError(502, f"Prometheus refused the query: {body.get('error', 'unknown error')}")
        return body["data"]["result"]
