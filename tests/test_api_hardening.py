"""The endpoint under hostile and heavy use (issue 37): quoting, repeated parameters, leaks, redirects, shedding.

The tests here need no Prometheus (refusals come before any query, or come from a stand-in upstream
that answers errors); those against a real Prometheus are in test_api_hardening_e2e.py.
"""

from __future__ import annotations

import ast
import sys

import pytest
from gpu_execution_pack.api.app import FLEET_PATH, PATH, SUMMARY_PATH, create_app
from gpu_execution_pack.api.openapi import openapi_document
from gpu_execution_pack.api.shedding import Shedder, Ticket
from gpu_execution_pack.config import config_from_mapping
from gpu_execution_pack.promql import aggregate, call, match, render, selector
from gpu_execution_pack.promql.printer import WIDTH
from gpu_execution_pack.query.params import RequestError
from starlette.testclient import TestClient

from harness.upstreams import Proxy

from .test_serve import nothing_listens

ADMIN = "admin-key-0123456789"
RESEARCH = "research-key-0123456789"
KEYS = {ADMIN: "*", RESEARCH: "research"}
AUTH = {"Authorization": f"Bearer {ADMIN}"}
METRICS = PATH.format(execution_id="train-0001")
SUMMARY = SUMMARY_PATH.format(execution_id="train-0001")

# What ends a line for Python's str.splitlines (the printer re-wrapped with it), and for Unicode.
LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"


def app_for(url: str | None = None, **config) -> TestClient:
    api = {"prometheus_url": url or nothing_listens(), **config.pop("api", {})}
    return TestClient(create_app(config_from_mapping({"api": api, **config}), KEYS))


def characters_to_escape() -> list[str]:
    """Every line break, every control (C0, DEL, C1), every format character, U+FFFD: from Unicode's own tables."""
    import unicodedata

    found = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c < 0xE000]
    found = [ch for ch in found if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")]
    return sorted(set(found) | set(LINE_BREAKS) | {"\ufffd"})


def literal_in(printed: str) -> str:
    """The one string literal of a printed query (between its first and last double quote)."""
    return printed[printed.index('"') : printed.rindex('"') + 1]


# --- 1. Quoting -------------------------------------------------------------------------------


def test_no_line_break_or_control_character_is_printed_raw_in_a_literal():
    for ch in characters_to_escape():
        value = f"c1{ch}x"
        printed = render(selector("m", match("cluster", value)))
        assert ch not in printed, f"U+{ord(ch):04X} printed raw: {printed!r}"
        assert len(printed.splitlines()) == 1, f"U+{ord(ch):04X} breaks the line: {printed!r}"
        # Go's escapes that the printer writes (\n, \uXXXX, \UXXXXXXXX) are Python's too: read them back.
        assert ast.literal_eval(literal_in(printed)) == value, f"U+{ord(ch):04X}: {printed!r}"


def test_a_long_query_is_rewrapped_only_outside_its_literals():
    value = "a" + LINE_BREAKS + "\u2028b" * 5
    long = aggregate("sum", ("hostname",), call("rate", selector("x" * WIDTH, match("cluster", value)).range("5m")))
    printed = render(long)
    assert "\n" in printed  # laid out on several lines
    [line] = [line for line in printed.split("\n") if "cluster=" in line]  # the literal is whole on one line
    assert ast.literal_eval(literal_in(line)) == value
    assert printed.splitlines() == printed.split("\n")  # no character in it ends a line but the layout's


def test_a_lone_surrogate_cannot_be_printed():
    with pytest.raises(ValueError, match="surrogate"):
        render(selector("m", match("a", "\ud800")))


# --- 1b. Bytes that are not UTF-8: a 400 naming the parameter, not a 502 --------------------------


@pytest.mark.parametrize("route", [METRICS, SUMMARY, FLEET_PATH])
def test_a_parameter_that_is_not_utf8_is_a_400_naming_it(route):
    with app_for(cluster_label="cluster") as client:
        response = client.get(f"{route}?cluster=c1%FF", headers=AUTH)
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith("cluster is not UTF-8"), response.text


def test_an_execution_id_that_is_not_utf8_is_a_400_naming_it():
    with app_for(api={"execution_id_pattern": ".+"}) as client:
        response = client.get(PATH.format(execution_id="run%FF%FE"), headers=AUTH)
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith("execution_id (the path) is not UTF-8"), response.text


# --- 2. Each parameter once -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "route, query, name",
    [
        (METRICS, "step=1h&step=5m", "step"),
        (METRICS, "start=2026-01-01T00:00:00Z&end=2026-01-02T00:00:00Z&start=2026-01-01T01:00:00Z", "start"),
        (METRICS, "end=2026-01-02T00:00:00Z&end=2026-01-02T00:00:00Z", "end"),
        (SUMMARY, "start=2026-01-01T00:00:00Z&start=2026-01-01T01:00:00Z", "start"),
        (FLEET_PATH, "since=1d&since=7d", "since"),
        (FLEET_PATH, "top=5&top=10", "top"),
        (METRICS, "tenant=a&tenant=b", "tenant"),
    ],
)
def test_a_parameter_given_twice_is_a_400_naming_it(route, query, name):
    with app_for() as client:  # refused before Prometheus is asked: nothing listens there
        response = client.get(f"{route}?{query}", headers=AUTH)
    assert response.status_code == 400, response.text
    assert response.json() == {"error": f"{name}: given 2 times; accepted: once"}


@pytest.mark.parametrize("route", [METRICS, SUMMARY, FLEET_PATH])
def test_an_authorization_header_given_twice_is_a_400_whichever_key_comes_first(route):
    """The first one counted before: a bad key then a good one was a 401, the other way round a 200."""
    with app_for() as client:  # refused before Prometheus is asked: nothing listens there
        for keys in (
            [AUTH["Authorization"], "Bearer wrong-key-wrong-key"],
            ["Bearer wrong-key-wrong-key", AUTH["Authorization"]],
        ):
            response = client.get(route, headers=[("Authorization", k) for k in keys])
            assert response.status_code == 400, response.text
            assert response.json() == {"error": "Authorization: given more than once; send one Bearer key"}


@pytest.mark.parametrize("route", [METRICS, SUMMARY, FLEET_PATH])
def test_tenant_star_is_refused_not_looked_for_as_a_tenant(route):
    """`*` is the keys file's word for every tenant; asked as a tenant it found nothing: a 404, an empty fleet."""
    with app_for() as client:  # refused before Prometheus is asked: nothing listens there
        response = client.get(f"{route}?tenant=*", headers=AUTH)
    assert response.status_code == 400, response.text
    assert response.json() == {"error": "tenant: '*'; leave tenant out for every tenant the key reads"}


@pytest.mark.parametrize("route", [METRICS, SUMMARY, FLEET_PATH])
def test_a_tenants_answer_is_kept_by_no_shared_cache_and_the_summary_varies_by_accept(route):
    """A cache before the endpoint kept one key's answer for the next (a proxy adding the key, as README suggests
    for browsers), and could give the summary's page to a JSON client: the answers said nothing of either."""
    with app_for() as client:  # nothing listens at Prometheus' address: an answer all the same (502)
        response = client.get(route, headers=AUTH)
    assert response.headers["cache-control"] == "private, no-store", response.headers
    assert (response.headers.get("vary") == "Accept") == (route == SUMMARY), response.headers


def test_an_offset_whose_plus_a_url_turned_into_a_space_says_to_encode_it():
    with app_for() as client:
        response = client.get(f"{METRICS}?start=2026-01-01T03:20:00+01:00", headers=AUTH)
    assert response.status_code == 400, response.text
    assert response.json()["error"].endswith("(a + in a URL must be sent as %2B)"), response.text


@pytest.mark.parametrize(
    "route, query, name, accepted",
    [
        (METRICS, "stpe=1m", "stpe", "cluster, end, series, start, step, tenant"),
        (METRICS, "step=1m&foo=bar", "foo", "cluster, end, series, start, step, tenant"),
        (SUMMARY, "step=1m", "step", "cluster, end, start, tenant"),
        (FLEET_PATH, "limit=5", "limit", "cluster, since, tenant, top"),
    ],
)
def test_a_parameter_the_route_does_not_take_is_a_400_naming_it_and_those_it_takes(route, query, name, accepted):
    # A misspelt ?stpe=1m used to answer 200 at the default step: the caller never learnt the step was not theirs.
    with app_for() as client:  # refused before Prometheus is asked: nothing listens there
        response = client.get(f"{route}?{query}", headers=AUTH)
    assert response.status_code == 400, response.text
    assert response.json() == {"error": f"{name}: not a parameter of this route; accepted: {accepted}"}


# --- 3. No internal URL, no unbounded upstream text ------------------------------------------------


def refusing(text: str) -> Proxy:
    """An upstream that answers every query as Prometheus refuses one, with ``text`` as its error."""
    body = f'{{"status": "error", "errorType": "bad_data", "error": "{text}"}}'.encode()
    return Proxy(None, lambda seen, status, _: (400, body))


def test_an_upstream_refusal_is_passed_on_bounded_and_without_its_url():
    with refusing("parse error: " + "x" * 2000) as upstream, app_for(upstream.url) as client:
        for route in (METRICS, SUMMARY, FLEET_PATH):
            response = client.get(route, headers=AUTH)
            assert response.status_code == 502, response.text
            message = response.json()["error"]
            if route != FLEET_PATH:  # the fleet view asks for Prometheus' configuration first, refused too
                assert message.startswith("Prometheus refused the query: parse error: xxx"), message
            assert len(message) < 400, len(message)
            assert upstream.url.removeprefix("http://") not in response.text


def test_an_unreachable_upstream_is_a_502_without_its_url():
    url = nothing_listens()
    with app_for(url) as client:
        response = client.get(METRICS, headers=AUTH)
    assert response.status_code == 502, response.text
    assert url.removeprefix("http://") not in response.text and "127.0.0.1" not in response.text


def test_readyz_says_only_not_ready_whatever_the_upstream_says():
    with refusing("y" * 2000) as upstream, app_for(upstream.url) as client:
        response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "not ready"}


# --- 4. No redirect -----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [METRICS + "/", SUMMARY + "/", FLEET_PATH + "/", "/readyz/", "/healthz/"])
def test_a_trailing_slash_is_a_404_not_a_redirect_to_the_clients_host(path):
    with app_for() as client:
        response = client.get(f"{path}?step=5m", headers={"Host": "evil.example"}, follow_redirects=False)
    assert response.status_code == 404, response.text
    assert "location" not in response.headers
    assert response.json()["error"].startswith("no such route")


# --- 5. Load shedding (the burst itself: test_api_hardening_e2e.py and bench/burst.py) ---------------


def test_points_past_the_limit_are_a_429_with_retry_after_and_any_request_alone_runs():
    shedder = Shedder(max_points=10_000, max_memory_bytes=2**40, retry_after_seconds=3)
    first, second, third = Ticket(shedder), Ticket(shedder), Ticket(shedder)
    first.take(1_000_000)  # alone: admitted, holding the whole budget
    assert shedder.in_flight == 10_000
    with pytest.raises(RequestError) as refused:
        second.take(1)
    assert refused.value.status == 429 and refused.value.headers == {"Retry-After": "3"}
    assert "api.max_points_in_flight" in str(refused.value)
    first.release()
    second.take(6_000)
    third.take(4_000)
    with pytest.raises(RequestError):
        third.take(4_001)  # more for a request that holds some: the others' and its own count
    second.release()
    third.release()
    third.release()  # given back once only
    assert shedder.in_flight == 0


def test_the_oldest_request_holding_points_is_admitted_more_so_a_burst_finishes_one():
    """Two requests admitted together on their base weight, each then asking for its window: were both refused
    because of the other, a burst would answer nothing but 429 (seen on Prometheus 3, whose span lookup is
    quicker). The older goes on; the younger is refused."""
    shedder = Shedder(max_points=4_000, max_memory_bytes=2**40, retry_after_seconds=1)
    older, younger = Ticket(shedder), Ticket(shedder)
    older.take(2_000)
    younger.take(2_000)
    with pytest.raises(RequestError) as refused:
        younger.take(30_000)
    assert refused.value.status == 429
    older.take(30_000)  # capped at the capacity: it runs
    assert older.weight == 4_000
    younger.release()
    older.release()
    assert shedder.in_flight == 0 and not shedder.holding


def test_memory_over_the_limit_is_a_503_while_others_are_in_flight():
    shedder = Shedder(max_points=10_000, max_memory_bytes=1, retry_after_seconds=2)  # always over
    first, second = Ticket(shedder), Ticket(shedder)
    first.take(10)  # alone: runs whatever the memory
    with pytest.raises(RequestError) as refused:
        second.take(10)
    assert refused.value.status == 503 and refused.value.headers == {"Retry-After": "2"}
    assert "api.max_memory_mb" in str(refused.value)


# --- 6. Small ones --------------------------------------------------------------------------------------


def test_a_401_names_the_bearer_scheme():
    with app_for() as client:
        for route in (METRICS, SUMMARY, FLEET_PATH):
            response = client.get(route)
            assert response.status_code == 401
            assert response.headers["www-authenticate"] == "Bearer"


def test_an_empty_step_says_it_is_empty():
    with app_for() as client:
        response = client.get(f"{METRICS}?step=", headers=AUTH)
    assert response.status_code == 400
    message = response.json()["error"]
    assert message.startswith("step: empty") and "longer than" not in message, message


def test_a_long_since_is_not_echoed_whole():
    with app_for() as client:
        response = client.get(f"{FLEET_PATH}?since={'9' * 20_000}x", headers=AUTH)
    assert response.status_code == 400
    assert response.json()["error"].startswith("since: ") and len(response.text) < 300, len(response.text)


def test_a_scoped_key_cannot_name_another_tenant():
    with app_for() as client:
        response = client.get(f"{METRICS}?tenant=physics", headers={"Authorization": f"Bearer {RESEARCH}"})
    assert response.status_code == 400
    assert response.json()["error"].startswith("tenant: accepted only from a key to every tenant")


# --- The OpenAPI document --------------------------------------------------------------------------------


def test_the_openapi_document_lists_409_429_503_and_the_tenant_parameter():
    document = openapi_document()
    for path in (PATH, SUMMARY_PATH, FLEET_PATH):
        get = document["paths"][path]["get"]
        assert "tenant" in [p["name"] for p in get["parameters"]]
        for status in ("429", "503"):
            assert "Retry-After" in get["responses"][status]["headers"], (path, status)
        assert "WWW-Authenticate" in get["responses"]["401"]["headers"]
    for path in (PATH, SUMMARY_PATH):
        assert document["paths"][path]["get"]["responses"]["409"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/Ambiguous"
        }
