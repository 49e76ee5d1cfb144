"""The served OpenAPI document says what the endpoint accepts, and schemathesis holds the endpoint to it.

schemathesis reads /openapi.json from the app served by uvicorn on loopback, with the training
scenario's real Prometheus behind it, and sends requests generated from the document (valid and
invalid ones, 50 each for the metrics route, fewer for the report's, each sent again for an execution that exists;
derandomized, so every run sends the same): no answer may be a 5xx, and every answer must have a
documented status, JSON, and the documented schema.
"""

from __future__ import annotations

import re

import pytest
import schemathesis
from gpu_execution_pack.api.app import FLEET_PATH, PATH, SUMMARY_PATH, create_app
from gpu_execution_pack.config import Config, config_from_mapping
from gpu_execution_pack.query.params import MAX_ID_LENGTH, parse_step
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from harness.upstreams import served

from .conftest import EXECUTION
from .test_api import ADMIN, KEYS

# Our own server's answers against its schema: nothing in them depends on the Prometheus version.
pytestmark = [pytest.mark.single_version, pytest.mark.usefixtures("promtool_available")]
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def served_api(prometheus):
    server, _, _, _ = prometheus
    with served(create_app(config_from_mapping({"api": {"prometheus_url": server.url}}), KEYS)) as url:
        yield url


@pytest.fixture
def api_schema(served_api):
    return schemathesis.openapi.from_url(f"{served_api}/openapi.json")


def metrics_parameters(doc: dict) -> dict[str, dict]:
    return {p["name"]: p for p in doc["paths"][PATH]["get"]["parameters"]}


@pytest.mark.e2e
def test_the_document_declares_the_id_rule_and_the_parameters_formats(api_schema):
    params = metrics_parameters(api_schema.raw_schema)
    assert params["execution_id"]["schema"] == {
        "type": "string",
        "pattern": Config().api.execution_id_pattern,  # the one place the id rule lives
        "maxLength": MAX_ID_LENGTH,
    }
    assert params["start"]["schema"]["format"] == params["end"]["schema"]["format"] == "date-time"
    step = params["step"]["schema"]
    assert parse_step(step["default"]) == 15
    for accepted in ("15s", "1m", "1h30m", "500ms", "1y"):
        assert re.fullmatch(step["pattern"], accepted), accepted
    for refused in ("15", "1m5h", "fast", "1.5m"):  # what Prometheus' grammar refuses, the pattern refuses
        assert not re.fullmatch(step["pattern"], refused), refused


def test_the_id_pattern_follows_the_config():
    pattern = "^job-[0-9]+$"
    app = create_app(config_from_mapping({"api": {"execution_id_pattern": pattern}}), KEYS)
    with served(app) as url:
        doc = schemathesis.openapi.from_url(f"{url}/openapi.json").raw_schema
    assert metrics_parameters(doc)["execution_id"]["schema"]["pattern"] == pattern


# schemathesis' pytest integration (schema.parametrize with from_fixture) reads a pytest internal that
# pytest 9 removed (Function._nodeid), so each route's strategy is run under hypothesis' own @given.
@pytest.mark.parametrize(
    ("path", "mode", "examples"),
    [
        (PATH, GenerationMode.POSITIVE, 50),
        (PATH, GenerationMode.NEGATIVE, 50),
        (SUMMARY_PATH, GenerationMode.POSITIVE, 25),
        (SUMMARY_PATH, GenerationMode.NEGATIVE, 25),
        (FLEET_PATH, GenerationMode.POSITIVE, 15),
        (FLEET_PATH, GenerationMode.NEGATIVE, 15),
        ("/healthz", GenerationMode.POSITIVE, 3),  # no parameters: nothing to make invalid
        ("/readyz", GenerationMode.POSITIVE, 3),
        ("/openapi.json", GenerationMode.POSITIVE, 3),
    ],
    ids=str,
)
@pytest.mark.e2e
def test_generated_requests_get_documented_answers_and_never_a_5xx(api_schema, path, mode, examples):
    auth = {"Authorization": f"Bearer {ADMIN}"}

    @given(case=api_schema[path]["GET"].as_strategy(mode))
    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def fuzz(case) -> None:
        case.call_and_validate(headers=auth, checks=CHECKS, timeout=30)
        if case.path_parameters:  # the same parameters for an execution that exists
            case.path_parameters = {**case.path_parameters, "execution_id": EXECUTION}
            case.call_and_validate(headers=auth, checks=CHECKS, timeout=30)

    fuzz()
