"""How ``doctor``, ``query`` and ``report`` meet a Prometheus URL or an answer they cannot use: a malformed URL,
a body of the wrong shape, a server that is no Prometheus, credentials in the URL, a non-finite deadline, a
cluster label of the config's own, Ctrl-C. Each is one line naming what to change, never a traceback.

The servers here are small loopback HTTP servers that answer as Prometheus' API would, or misbehave on
purpose (``FaultServer``); the cluster label is also checked against a real Prometheus.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import math
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from http.server import SimpleHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import yaml
from gpu_execution_pack import catalog, cli
from gpu_execution_pack.config import Config, ConfigError, config_from_mapping, load_config
from gpu_execution_pack.doctor import probe
from gpu_execution_pack.query.prometheus import InvalidPrometheusURL, PrometheusClient, redacted
from gpu_execution_pack.scenario import library

from harness.upstreams import Answer, FaultServer, QuietServer, Seen

from .conftest import REPO

URL_SHAPE = "expected http(s)://host[:port][/route-prefix]"
BASE_URL_HINT = "is it a Prometheus base URL, e.g. http://host:9090 or http://host:9090/<route-prefix>?"
NAMES, RULES, TARGETS, RUNTIME = (
    "/api/v1/label/__name__/values",
    "/api/v1/rules",
    "/api/v1/targets",
    "/api/v1/status/runtimeinfo",
)


# --- A loopback server that answers as told ---------------------------------------------------------------


# harness.upstreams.FaultServer: every request kept as a Seen (a POST's form fields among ``params``).


def success(data: Any) -> bytes:
    return json.dumps({"status": "success", "data": data}).encode()


def empty_vector(seen: Seen) -> Any:
    return {"resultType": "vector", "result": []}


# What a Prometheus with no series, rules or targets answers on each path the doctor reads (a function of the
# request for the query API): every answer well formed.
WELL_FORMED: dict[str, Any] = {
    NAMES: [],
    RULES: {"groups": []},
    TARGETS: {"activeTargets": []},
    RUNTIME: {"storageRetention": "15d"},
    "/api/v1/query": empty_vector,
}


def prometheus_like(**replaced: Any) -> Callable[[Seen], Answer]:
    """Answers as WELL_FORMED has it, with the ``data`` of the paths in ``replaced`` (keyed by the path's
    constant's name: NAMES=...) replaced; any other path is a 404 page, as Prometheus' own."""
    paths = {"NAMES": NAMES, "RULES": RULES, "TARGETS": TARGETS, "RUNTIME": RUNTIME, "QUERY": "/api/v1/query"}
    data = {**WELL_FORMED, **{paths[name]: value for name, value in replaced.items()}}

    def answer(seen: Seen) -> Answer:
        if seen.path not in data:
            return 404, {"Content-Type": "text/plain"}, b"404 page not found"
        value = data[seen.path]
        return 200, {}, success(value(seen) if callable(value) else value)

    return answer


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``gpu-execution-pack argv`` in this process: its exit status, standard output and standard error."""
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def config_file(tmp_path: Path, data: dict) -> str:
    path = tmp_path / "pack.yml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def one_error_line(err: str) -> str:
    """The one line ``error: ...`` that ``err`` must be, without its prefix."""
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert "Traceback" not in err, err
    return err.removeprefix("error: ").rstrip("\n")


READING_COMMANDS = [("doctor",), ("query", "job-1"), ("report", "job-1")]


# --- 1. A malformed URL is refused before anything connects ------------------------------------------------


@pytest.mark.parametrize("command", READING_COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://[::1", "not a valid URL"),  # an IPv6 host's bracket left open
        ("http://127.0.0.1:99999", "65535"),  # past the last port: the range is named
        ("http://127.0.0.1:0", "65535"),
        ("http://127.0.0.1:-1", "65535"),  # a negative port is out of range, not "not a number"
        ("http://127.0.0.1:90a", "port"),
        ("not-a-url", "scheme"),
        ("127.0.0.1:40809", "scheme"),  # host and port without http://
        ("ftp://127.0.0.1:9090", "scheme"),
        ("http://", "host"),
        ("http://prom etheus:9090", "space"),
        ("http://127.0.0.1:9090/prom?x=1", "query"),
        ("", "scheme"),  # not "use the config's": an empty option given is a mistake to say
    ],
)
def test_a_malformed_prometheus_url_is_one_line_naming_the_option_and_the_shape(
    capsys: pytest.CaptureFixture[str], command: tuple[str, ...], url: str, why: str
):
    status, _, err = run_cli(capsys, *command, "--prometheus", url)
    line = one_error_line(err)
    assert status == 2, err  # the request is at fault, not Prometheus
    assert line.startswith(f"--prometheus {url!r}: "), line
    assert line.endswith(URL_SHAPE) and why in line, line


@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:99999", "127.0.0.1:9090"])
def test_a_malformed_api_prometheus_url_is_refused_when_the_config_is_loaded(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, url: str
):
    path = config_file(tmp_path, {"api": {"prometheus_url": url}})
    with pytest.raises(ConfigError, match=r"api\.prometheus_url: .* is not accepted; expected an http"):
        load_config(path)
    status, _, err = run_cli(capsys, "doctor", "--config", path)
    assert status == 2 and "api.prometheus_url" in one_error_line(err), err


def test_a_client_built_from_an_unchecked_config_names_api_prometheus_url():
    # A config built in code, not loaded: the client checks the URL itself, and says which key holds it.
    api = replace(Config().api, prometheus_url="http://[::1")
    with pytest.raises(InvalidPrometheusURL) as caught:
        PrometheusClient.for_config(api)
    assert str(caught.value).startswith("api.prometheus_url 'http://[::1': ") and caught.value.status < 500


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9090",
        "https://prometheus.example:443/prom/",
        "http://[::1]:9090",
        "http://admin:s3cret@127.0.0.1:9090",
        "http://prometheus",
        "http://127.0.0.1:65535",
    ],
)
def test_well_formed_urls_stay_accepted_by_the_config_and_the_client(url: str):
    assert config_from_mapping({"api": {"prometheus_url": url}}).api.prometheus_url == url
    client = PrometheusClient(url)
    asyncio.run(client.close())


# --- 2. An answer of the wrong shape is an unexpected body, never a crash ------------------------------------


@pytest.mark.parametrize(
    ("replaced", "path"),
    [
        ({"RUNTIME": None}, RUNTIME),  # {"status": "success", "data": null}
        ({"RUNTIME": ["15d"]}, RUNTIME),
        ({"RUNTIME": "15d"}, RUNTIME),
        ({"NAMES": None}, NAMES),
        ({"NAMES": {"up": 1}}, NAMES),
        ({"NAMES": "up"}, NAMES),
        ({"NAMES": ["up", 3]}, NAMES),
        ({"RULES": None}, RULES),
        ({"RULES": []}, RULES),
        ({"RULES": {"groups": "all"}}, RULES),
        ({"RULES": {"groups": [None]}}, RULES),
        ({"RULES": {"groups": [{"file": "a.yml"}]}}, RULES),  # a group without a name
        ({"RULES": {"groups": [{"name": "g", "interval": "often"}]}}, RULES),
        ({"RULES": {"groups": [{"name": "g", "rules": [["up"]]}]}}, RULES),
        (
            {"RULES": {"groups": [{"name": "g", "rules": [{"name": catalog.PACK_RULES_INFO.name, "labels": ["v"]}]}]}},
            RULES,
        ),
        ({"TARGETS": None}, TARGETS),
        ({"TARGETS": {"activeTargets": {"a": 1}}}, TARGETS),
        ({"TARGETS": {"activeTargets": [{"labels": ["job"]}]}}, TARGETS),
        ({"TARGETS": {"activeTargets": [{"labels": {"job": 1}}]}}, TARGETS),
        ({"TARGETS": {"activeTargets": [{"labels": {}, "scrapeInterval": "soon"}]}}, TARGETS),
        ({"TARGETS": {"activeTargets": [{"labels": {}, "scrapeInterval": 15}]}}, TARGETS),
    ],
)
def test_data_of_the_wrong_shape_is_one_line_saying_unexpected_body(
    capsys: pytest.CaptureFixture[str], replaced: dict[str, Any], path: str
):
    with FaultServer(prometheus_like(**replaced)) as server:
        status, out, err = run_cli(capsys, "doctor", "--prometheus", server.url)
    line = one_error_line(err)
    assert status == 3, err  # Prometheus is at fault
    assert f"answered {path} with an unexpected body" in line, line
    assert line.endswith(f"(Prometheus at {server.url})"), line
    assert out == ""


def test_an_instant_query_series_without_a_sample_is_an_unexpected_body(capsys: pytest.CaptureFixture[str]):
    def no_sample(seen: Seen) -> Any:
        return {"resultType": "matrix", "result": [{"metric": {}, "values": []}]}

    with FaultServer(prometheus_like(QUERY=no_sample)) as server:
        status, _, err = run_cli(capsys, "doctor", "--prometheus", server.url)
    assert status == 3 and "unexpected body" in one_error_line(err), err


def test_a_well_formed_empty_prometheus_is_read_without_error(capsys: pytest.CaptureFixture[str]):
    # The control of the cases above: the same server with every answer well formed gets a checklist.
    with FaultServer(prometheus_like()) as server:
        status, out, err = run_cli(capsys, "doctor", "--prometheus", server.url)
    assert status in (0, 1) and "error" not in err, err
    assert out.startswith("gpu-execution-pack doctor: "), out


def test_iteration_counts_in_metrics_text_with_timestamps_or_odd_values_are_read_or_skipped():
    text = "\n".join(
        [
            f'{probe.ITERATIONS}{{rule_group="/rules/a.yml;g"}} 12 1700000000000',  # a timestamp after the value
            f'{probe.ITERATIONS_MISSED}{{rule_group="/rules/a.yml;g"}} 2',
            f'{probe.ITERATIONS}{{rule_group="/rules/b.yml;h"}} many',  # not a number: not counted
        ]
    )
    assert probe.group_iterations(text) == {"g": (2.0, 12.0)}


# --- 3. A server that is no Prometheus is named, with what to check ------------------------------------------


def always(status: int, headers: dict[str, str], body: bytes) -> Callable[[Seen], Answer]:
    return lambda seen: (status, headers, body)


HTML = {"Content-Type": "text/html"}


@pytest.mark.parametrize(
    ("answer", "shown", "hinted"),
    [
        (always(404, {"Content-Type": "text/plain"}, b"404 page not found"), "(404: no JSON", True),
        (always(200, HTML, b"<html><body>Grafana</body></html>"), "(200: no JSON", True),
        (always(302, {"Location": "/login"}, b""), "redirected to /login", True),
        (always(502, HTML, b"<html>Bad Gateway</html>"), "(502: no JSON", True),
        (always(500, {}, json.dumps({"status": "error", "error": "boom"}).encode()), "(500: boom)", False),
        (always(200, {}, b"[1, 2]"), "(200: JSON, not an API answer", True),
    ],
    ids=["404", "html-page", "redirect", "proxy-502", "prometheus-500", "json-list"],
)
def test_a_server_that_serves_no_prometheus_api_is_named_with_its_url(
    capsys: pytest.CaptureFixture[str], answer: Callable[[Seen], Answer], shown: str, hinted: bool
):
    with FaultServer(answer) as server:
        status, _, err = run_cli(capsys, "doctor", "--prometheus", server.url)
    line = one_error_line(err)
    assert status == 3 and "did not serve /api/v1/" in line and shown in line, line
    assert f"(Prometheus at {server.url})" in line, line
    # A Prometheus refusing (its own JSON error) is not told to check that it is one.
    assert line.endswith(f"; {BASE_URL_HINT}") == hinted, line


@pytest.mark.parametrize("command", READING_COMMANDS, ids=lambda c: c[0])
def test_a_redirect_to_a_login_page_is_named_by_every_reading_command(
    capsys: pytest.CaptureFixture[str], command: tuple[str, ...]
):
    with FaultServer(always(302, {"Location": "/login?next=/api"}, b"")) as server:
        status, _, err = run_cli(capsys, *command, "--prometheus", server.url)
    line = one_error_line(err)
    assert status == 3 and "302" in line and "redirected to /login?next=/api" in line, line
    assert f"(Prometheus at {server.url})" in line and line.endswith(BASE_URL_HINT), line


@contextmanager
def static_file_server(folder: Path) -> Iterator[str]:
    """Python's own http.server over ``folder`` (``python3 -m http.server``): a web server, no Prometheus."""
    server = QuietServer(("127.0.0.1", 0), functools.partial(QuietFiles, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("command", READING_COMMANDS, ids=lambda c: c[0])
def test_a_plain_web_server_is_named_with_the_hint_by_every_reading_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: tuple[str, ...]
):
    with static_file_server(tmp_path) as url:
        status, _, err = run_cli(capsys, *command, "--prometheus", url)
    line = one_error_line(err)
    assert status == 3, err
    assert f"(Prometheus at {url})" in line and line.endswith(BASE_URL_HINT), line


# --- 4. Credentials in the URL go to Prometheus, never to the output ----------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://admin:s3cret@127.0.0.1:9090", "http://admin:***@127.0.0.1:9090"),
        ("https://admin:s3cret@prom.example/route", "https://admin:***@prom.example/route"),
        ("http://admin:p@ss:w0rd@127.0.0.1:9090/x", "http://admin:***@127.0.0.1:9090/x"),  # "@" and ":" in it
        ("http://tok3n@127.0.0.1:9090", "http://***@127.0.0.1:9090"),  # a user name alone may be a token
        ("http://127.0.0.1:9090/a@b", "http://127.0.0.1:9090/a@b"),  # an "@" in the path is no user info
        ("http://127.0.0.1:9090", "http://127.0.0.1:9090"),
        ("admin:s3cret@127.0.0.1:9090", "admin:***@127.0.0.1:9090"),  # the scheme left out: refused, and masked
        ("//admin:s3cret@127.0.0.1:9090", "//admin:***@127.0.0.1:9090"),
    ],
)
def test_redacted_masks_the_password_and_keeps_where(url: str, shown: str):
    assert redacted(url) == shown


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_credentials_in_the_url_are_sent_as_basic_auth_and_masked_in_errors(capsys: pytest.CaptureFixture[str]):
    with FaultServer(always(404, {"Content-Type": "text/plain"}, b"404 page not found")) as server:
        url = server.url.replace("http://", "http://admin:s3cret@")
        status, out, err = run_cli(capsys, "doctor", "--prometheus", url)
    assert status == 3
    assert "s3cret" not in out + err and f"(Prometheus at {server.url.replace('//', '//admin:***@')})" in err, err
    api = [seen for seen in server.seen if seen.path.startswith("/api/v1/")]
    assert api and all(seen.headers.get("authorization") == basic("admin", "s3cret") for seen in api), server.seen


def test_credentials_are_masked_when_a_malformed_url_is_refused(capsys: pytest.CaptureFixture[str]):
    status, _, err = run_cli(capsys, "doctor", "--prometheus", "http://admin:s3cret@127.0.0.1:99999")
    assert status == 2 and "s3cret" not in err and "admin:***@127.0.0.1:99999" in err, err


def test_credentials_are_masked_when_prometheus_is_too_slow(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    with hanging_server() as (url, _):
        path = config_file(tmp_path, {"api": {"timeout_seconds": 0.5}})
        status, _, err = run_cli(
            capsys, "doctor", "--config", path, "--prometheus", url.replace("http://", "http://admin:s3cret@")
        )
    line = one_error_line(err)
    assert status == 3 and "did not answer in time" in line, line
    assert "s3cret" not in line and "admin:***@" in line, line


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_the_doctors_header_and_json_name_the_url_with_its_password_masked(
    capsys: pytest.CaptureFixture[str], as_json: bool
):
    with FaultServer(prometheus_like()) as server:
        url = server.url.replace("http://", "http://admin:s3cret@")
        _, out, err = run_cli(capsys, "doctor", "--prometheus", url, *(["--json"] if as_json else []))
    assert "s3cret" not in out + err
    where = (
        json.loads(out)["prometheus"] if as_json else out.splitlines()[0].removeprefix("gpu-execution-pack doctor: ")
    )
    assert where == redacted(url)


# --- 5. The deadline is a finite number of seconds ----------------------------------------------------------


@pytest.mark.parametrize("written", [".nan", ".inf", "-.inf", "0", "-5"])
def test_a_timeout_that_is_not_a_finite_positive_number_is_refused_naming_the_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, written: str
):
    path = tmp_path / "pack.yml"
    path.write_text(f"api:\n  timeout_seconds: {written}\n")  # YAML's own spelling of NaN and the infinities
    status, _, err = run_cli(capsys, "doctor", "--config", str(path), "--prometheus", "http://127.0.0.1:9")
    line = one_error_line(err)
    assert status == 2 and "api.timeout_seconds: " in line and "is not accepted; expected a" in line, line
    assert "above 0" in line, line


def test_a_finite_timeout_stays_accepted():
    timeout = config_from_mapping({"api": {"timeout_seconds": 0.25}}).api.timeout_seconds
    assert timeout == 0.25 and math.isfinite(timeout)


# --- 6. The configured cluster label is asked, whatever it is called ------------------------------------------


def test_the_probe_asks_the_configured_cluster_label_beside_the_usual_ones():
    regions = ("eu-west", "us-east")

    def by_region(seen: Seen) -> Any:
        query = seen.params.get("query", [""])[0]
        if query.startswith("group by (region) ("):
            return {"resultType": "vector", "result": [{"metric": {"region": r}, "value": [1, "1"]} for r in regions]}
        return empty_vector(seen)

    cfg = config_from_mapping({"cluster_label": "region"})
    with FaultServer(prometheus_like(QUERY=by_region)) as server:
        deployment = asyncio.run(probed(cfg, server.url))
    assert deployment.cluster_values == {"region": regions}
    assert "region" not in probe.CLUSTER_LABELS  # the case at hand: a label outside the usual ones


async def probed(cfg: Config, url: str) -> probe.Deployment:
    client = PrometheusClient(url)
    try:
        return await probe.probe(cfg, client)
    finally:
        await client.close()


@pytest.mark.e2e
@pytest.mark.usefixtures("promtool_available")
def test_a_cluster_label_outside_the_usual_ones_passes_against_a_real_prometheus(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
):
    from .test_doctor import checks_of, doctor, serve

    by_region = {"vendors": ["nvidia"], "dcgm": {"generations": ["4.8"]}, "cluster_label": "region"}
    server = serve(tmp_path_factory.mktemp("regions"), by_region, library.two_clusters(), "15s")
    try:
        clusters = checks_of(doctor(server, by_region, tmp_path, "--json"))["clusters"]
    finally:
        server.stop()
    assert clusters["status"] == "pass", clusters
    assert "eu-1" in clusters["found"] and "us-1" in clusters["found"], clusters


# --- 7. Ctrl-C while Prometheus is asked ----------------------------------------------------------------------


@contextmanager
def hanging_server() -> Iterator[tuple[str, list[socket.socket]]]:
    """Accepts connections and never answers; yields its URL and the connections accepted so far."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", accepted
    finally:
        listener.close()
        for conn in accepted:
            conn.close()


def test_ctrl_c_while_prometheus_hangs_is_one_line_and_exit_130():
    with hanging_server() as (url, accepted):
        running = subprocess.Popen(
            [sys.executable, "-m", "gpu_execution_pack", "doctor", "--prometheus", url],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 30
            while not accepted:  # the command is waiting on Prometheus
                assert time.monotonic() < deadline and running.poll() is None, "the command did not ask"
                time.sleep(0.05)
            running.send_signal(signal.SIGINT)
            _, err = running.communicate(timeout=30)
        finally:
            running.kill()
            running.wait()
    assert running.returncode == 130, err
    assert err == "interrupted\n", err


def test_a_count_answered_as_nan_or_infinite_is_an_unexpected_body(capsys: pytest.CaptureFixture[str]):
    """A compatible API may answer a count with "NaN" or "+Inf": one line, exit 3, not a crash in int()."""
    for value in ("NaN", "+Inf"):

        def counted(seen: Seen, value: str = value) -> Any:
            return {"resultType": "vector", "result": [{"metric": {}, "value": [1e9, value]}]}

        with FaultServer(prometheus_like(QUERY=counted)) as server:
            status, _, err = run_cli(capsys, "doctor", "--prometheus", server.url)
        line = one_error_line(err)
        assert status == 3 and "unexpected body" in line and "counted as" in line, line


def test_a_401_hints_at_the_credentials_not_the_base_url(capsys: pytest.CaptureFixture[str]):
    with FaultServer(
        always(401, {"Content-Type": "text/plain", "WWW-Authenticate": "Basic"}, b"Unauthorized")
    ) as server:
        status, _, err = run_cli(capsys, "doctor", "--prometheus", server.url)
    line = one_error_line(err)
    assert status == 3 and "check the credentials" in line and BASE_URL_HINT not in line, line


def test_the_fleet_report_says_prometheus_is_unreachable_not_that_it_serves_no_configuration(
    capsys: pytest.CaptureFixture[str],
):
    """report --since reads Prometheus' evaluation interval where the config names none: with nothing listening,
    the error is that (as every other command says it), not advice for a query API without a configuration."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    status, _, err = run_cli(capsys, "report", "--since", "1d", "--prometheus", f"http://127.0.0.1:{port}")
    line = one_error_line(err)
    assert status == 3 and "unreachable" in line and "rule_interval" not in line, line
    with FaultServer(always(404, {"Content-Type": "text/plain"}, b"404 page not found")) as server:
        status, _, err = run_cli(capsys, "report", "--since", "1d", "--prometheus", server.url)
    line = one_error_line(err)
    # A server without /api/v1/status/config (a query frontend, or no Prometheus): both are said.
    assert status == 3 and line.endswith(BASE_URL_HINT) and "set rule_interval and derived_rule_interval where" in line
