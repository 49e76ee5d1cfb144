"""Serving the endpoint: no keys refused (or, on request, no auth), health probes, JSON errors for any route."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from gpu_execution_pack.api.app import PATH, READY_TIMEOUT_SECONDS, create_app
from gpu_execution_pack.api.auth import ENV_KEYS
from gpu_execution_pack.config import ConfigError, config_from_mapping
from starlette.testclient import TestClient

from harness.prometheus import free_port
from harness.upstreams import served

from .conftest import EXECUTION, REPO

pytestmark = pytest.mark.usefixtures("promtool_available")

KEY = "serve-test-key-0123456789"
LOGGER = "gpu_execution_pack.api"


@pytest.fixture(autouse=True)
def _no_keys_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_KEYS, raising=False)


def cfg_for(url: str, **api):
    return config_from_mapping({"api": {"prometheus_url": url, **api}})


def nothing_listens() -> str:
    return f"http://127.0.0.1:{free_port()}"


def metrics_path(execution_id: str = EXECUTION) -> str:
    return PATH.format(execution_id=quote(execution_id, safe=""))


# --- No keys --------------------------------------------------------------------------------


@pytest.mark.parametrize("keys", [None, {}], ids=["resolved", "passed"])
def test_without_keys_the_app_refuses_to_start_and_says_where_keys_come_from(keys):
    with pytest.raises(ConfigError) as raised:
        create_app(cfg_for(nothing_listens()), keys)
    message = str(raised.value)
    for hint in ("api.keys_file", "<key> <tenant>", "GPU_PACK_API_KEYS=key:tenant", "--insecure-no-auth"):
        assert hint in message, message


def test_an_empty_keys_file_is_refused_naming_the_file(tmp_path: Path):
    keys_file = tmp_path / "keys"
    keys_file.write_text("# no keys yet\n")
    with pytest.raises(ConfigError, match="--insecure-no-auth") as raised:
        create_app(cfg_for(nothing_listens(), keys_file=str(keys_file)))
    assert str(keys_file) in str(raised.value)


@pytest.mark.parametrize(
    ("source", "entry"),
    [("file", "`<key of 16+ characters> <tenant or *>`"), ("env", "`<key of 16+ characters>:<tenant or *>, comma")],
)
def test_a_short_key_is_refused_in_the_format_of_where_it_was_given(
    source: str, entry: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    keys_file = ""
    if source == "file":
        keys_file = str(tmp_path / "keys")
        Path(keys_file).write_text("short research\n")
    else:
        monkeypatch.setenv(ENV_KEYS, "short:research")
    with pytest.raises(ConfigError) as raised:
        create_app(cfg_for(nothing_listens(), keys_file=keys_file))
    message = str(raised.value)
    assert message.startswith(keys_file or ENV_KEYS) and "entry 1" in message and entry in message, message


def test_keys_from_the_environment_are_enough(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(ENV_KEYS, f"{KEY}:research")
    with TestClient(create_app(cfg_for(nothing_listens()))) as client:
        response = client.get(metrics_path())
    assert response.status_code == 401  # started, and asks for the key


@pytest.mark.single_version  # our server's auth
@pytest.mark.e2e
def test_insecure_no_auth_serves_every_tenant_without_a_key_and_warns_once(prometheus, caplog):
    server, _, _, _ = prometheus
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        app = create_app(cfg_for(server.url), insecure_no_auth=True)
        with TestClient(app) as client:
            for headers in ({}, {"Authorization": "Bearer not-a-key-of-anyone"}):
                response = client.get(metrics_path(), params={"step": "5m"}, headers=headers)
                assert response.status_code == 200, response.text
                assert response.json()["executionId"] == EXECUTION
    warnings = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "--insecure-no-auth" in warnings[0].getMessage()


@pytest.mark.single_version  # our server's auth
@pytest.mark.e2e
def test_with_keys_a_request_without_one_is_still_401(prometheus):
    server, _, _, _ = prometheus
    with TestClient(create_app(cfg_for(server.url), {KEY: "*"})) as client:
        assert client.get(metrics_path()).status_code == 401
        assert client.get(metrics_path(), headers={"Authorization": f"Bearer {KEY}"}).status_code == 200


# --- Probes ---------------------------------------------------------------------------------


def test_healthz_answers_without_a_key_and_without_prometheus():
    with TestClient(create_app(cfg_for(nothing_listens()), {KEY: "*"})) as client:
        response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.e2e
def test_readyz_is_200_when_prometheus_answers(prometheus):
    server, _, _, _ = prometheus
    with TestClient(create_app(cfg_for(server.url), {KEY: "*"})) as client:
        response = client.get("/readyz")
    assert response.status_code == 200, response.text
    assert response.json() == {"status": "ready"}


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/openapi.json"])
@pytest.mark.parametrize("query", ["x=1", "x", "step=5m&step=5m"])
def test_a_probe_refuses_query_parameters_as_every_route_does(path, query):
    """/healthz?x=1 (and /openapi.json?x=1) was a 200 where every other route refuses a parameter it does not take:
    a 400 naming it (before Prometheus is asked: nothing listens here), the probe or document taking none."""
    with TestClient(create_app(cfg_for(nothing_listens()), {KEY: "*"})) as client:
        response = client.get(f"{path}?{query}")
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/json"
    name = query.split("=")[0]
    assert response.json() == {
        "error": f"{name}: not a parameter of this route; accepted: none (it takes no query parameters)"
    }


def test_readyz_is_503_at_once_when_nothing_listens():
    with TestClient(create_app(cfg_for(nothing_listens()), {KEY: "*"})) as client:
        began = time.monotonic()
        response = client.get("/readyz")
        elapsed = time.monotonic() - began
    assert response.status_code == 503
    # /readyz needs no key: it says not ready and nothing else (not Prometheus' URL, nor its words).
    assert response.json() == {"status": "not ready"}
    assert elapsed < READY_TIMEOUT_SECONDS


@pytest.mark.single_version  # a listener that never answers
@pytest.mark.e2e
def test_readyz_is_503_within_its_timeout_when_prometheus_never_answers():
    with socket.socket() as listener:  # the kernel completes connections; nobody ever reads or answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        cfg = cfg_for(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout_seconds=30)
        with TestClient(create_app(cfg, {KEY: "*"})) as client:
            began = time.monotonic()
            response = client.get("/readyz")
            elapsed = time.monotonic() - began
    assert response.status_code == 503
    assert response.json() == {"status": "not ready"}
    assert elapsed < READY_TIMEOUT_SECONDS + 2, elapsed  # not the 30 s of api.timeout_seconds


# --- Errors for any route -------------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(cfg_for(nothing_listens()), {KEY: "*"})) as client:
        yield client


@pytest.mark.parametrize("path", ["/nope", "/api/v2/external/execution/x", "/api/v2/external/execution/x/metricz"])
def test_an_unknown_route_is_a_json_404(client, path):
    response = client.get(path, headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json"
    assert path in response.json()["error"]


@pytest.mark.parametrize(("method", "path"), [("POST", "/healthz"), ("DELETE", metrics_path()), ("PUT", "/readyz")])
def test_a_wrong_method_is_a_json_405_naming_the_allowed_ones(client, method, path):
    response = client.request(method, path, headers={"Authorization": f"Bearer {KEY}"})
    assert response.status_code == 405
    assert response.headers["content-type"] == "application/json"
    assert "GET" in response.headers["allow"]
    assert method in response.json()["error"] and "GET" in response.json()["error"]


def test_the_openapi_document_lists_the_probes_and_itself_without_auth(client):
    doc = client.get("/openapi.json").json()
    assert set(doc["paths"]["/healthz"]["get"]["responses"]) == {"200", "400"}
    assert set(doc["paths"]["/readyz"]["get"]["responses"]) == {"200", "400", "503"}
    assert set(doc["paths"]["/openapi.json"]["get"]["responses"]) == {"200", "400"}
    for probe in ("/healthz", "/readyz", "/openapi.json"):
        assert doc["paths"][probe]["get"]["security"] == []  # overrides the document-wide bearer
    assert doc["security"] == [{"bearer": []}]  # the metrics route still needs a key


# --- Real HTTP ------------------------------------------------------------------------------


@pytest.mark.single_version  # uvicorn serving our app
@pytest.mark.e2e
def test_served_by_uvicorn_on_loopback(prometheus):
    server, _, _, _ = prometheus
    app = create_app(cfg_for(server.url), {KEY: "research"})
    with served(app) as url, httpx.Client(base_url=url, timeout=10) as http:  # serve's uvicorn settings
        assert http.get("/healthz").json() == {"status": "ok"}
        assert http.get("/readyz").status_code == 200
        missing = http.get("/nope")
        assert missing.status_code == 404 and missing.headers["content-type"] == "application/json"
        wrong = http.post("/healthz")
        assert wrong.status_code == 405 and "error" in wrong.json()
        ok = http.get(metrics_path(), params={"step": "5m"}, headers={"Authorization": f"Bearer {KEY}"})
        assert ok.status_code == 200 and ok.json()["executionId"] == EXECUTION


@pytest.mark.single_version  # our worker processes
@pytest.mark.e2e
def test_serve_with_workers_answers_from_several_processes(prometheus, tmp_path: Path):
    """`serve --workers 2` starts two worker processes, each building the app from the same config."""
    server, _, _, _ = prometheus
    config = tmp_path / "pack.yml"
    config.write_text(f"api: {{prometheus_url: '{server.url}'}}\n")
    port = free_port()
    env = {**os.environ, ENV_KEYS: f"{KEY}:research"}
    command = [sys.executable, "-m", "gpu_execution_pack", "serve", "-c", str(config), "--port", str(port)]
    proc = subprocess.Popen([*command, "--workers", "2"], env=env, cwd=REPO, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        with httpx.Client(base_url=url, timeout=30) as http:
            answers = [
                http.get(metrics_path(), params={"step": "5m"}, headers={"Authorization": f"Bearer {KEY}"})
                for _ in range(6)
            ]
        assert all(a.status_code == 200 and a.json()["executionId"] == EXECUTION for a in answers)
        assert len({a.content for a in answers}) == 1  # every worker answers alike
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert err.count("Started server process") == 2, err[-2000:]
    refused = subprocess.run([*command, "--workers", "0"], env=env, cwd=REPO, capture_output=True, text=True)
    assert refused.returncode != 0 and "--workers: 0 is not accepted" in refused.stderr
    assert "Traceback" not in refused.stderr


# --- The test client's dependencies -----------------------------------------------------------


def test_the_test_client_imports_without_a_deprecation_warning():
    # starlette's StarletteDeprecationWarning is a UserWarning, so only `-W error` catches both kinds.
    proc = subprocess.run(
        [sys.executable, "-W", "error", "-c", "import starlette.testclient"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
