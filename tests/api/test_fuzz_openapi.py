"""Schemathesis against the app's own OpenAPI document: generated requests, valid and invalid, with every
credential scheme the document declares. No answer may be a 5xx, and every answer must be one the document
promises: a documented status code, its content type, a body that matches its schema.

The number of examples is bounded and the generation deterministic, so the suite stays fast and a failure
is reproducible run after run.
"""

from __future__ import annotations

import base64
import os
import re
import uuid

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from jsonschema import Draft202012Validator
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.core.control import SkipTest
from schemathesis.errors import UnsupportedSchema
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.auth import FailedCredentials

from conftest import BASIC, CI_SECRET, PASSWORDS
from events_kit import GITHUB_SECRET, GITLAB_TOKEN, TRACKER_SECRET

pytestmark = pytest.mark.fuzz

# Per operation and mode. `FUZZ_EXAMPLES=200 make test` digs deeper: such runs found the bugs whose tests say
# "found by the schemathesis run".
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
# A body the document allows must not be refused (a 4xx other than those of credentials, a missing resource or a
# conflict): found POST events, whose document allowed any object while the router refused all but a conforming
# envelope. Only operations with a request body: a `cursor` is opaque, one the service issued. Webhook payloads
# are left out: the document shows the senders' envelope, and which event shapes a normalizer knows is the
# responder's to say.
ACCEPTANCE = [positive_data_acceptance]
BASIC_HEADER = "Basic " + base64.b64encode(BASIC.encode()).decode()
# A worker account: the run goes again as a worker (its own endpoints in full, the others briefly: 403).
WORKER = "fuzz-bay:worker-password-1"
WORKER_HEADER = "Basic " + base64.b64encode(WORKER.encode()).decode()
WORKER_EXAMPLES = 3
# The members, path and query parameters that name something (a ticket, an initiative, a bay, a slot, an account, a
# rule): one holding a control character is refused wherever it is taken, never a 2xx.
# A `name` is one in a path (a slot's) and in a policy's rules; an initiative's `name` is words for people.
IDENTIFIERS = frozenset({"key", "id", "ticket", "initiative_id", "subject_id", "bay", "slot"})
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _identifiers_with_control_characters(value, name: str | None = None, *, names: bool = False) -> list[str]:
    if isinstance(value, str):
        named = name in IDENTIFIERS or (names and name == "name")
        return [f"{name}={value!r}"] if named and CONTROL.search(value) else []
    if isinstance(value, dict):
        return [
            found
            for key, inner in value.items()
            for found in _identifiers_with_control_characters(inner, key, names=names or key == "rules")
        ]
    if isinstance(value, list):
        return [found for inner in value for found in _identifiers_with_control_characters(inner, name, names=names)]
    return []


@schemathesis.check
def no_2xx_for_an_identifier_with_a_control_character(ctx, response, case) -> bool | None:
    """An identifier holding a control character (a trailing line break included) is refused: never a 2xx."""
    found = [
        *_identifiers_with_control_characters(case.path_parameters or {}, names=True),
        *_identifiers_with_control_characters(case.query or {}),
        *_identifiers_with_control_characters(case.body if isinstance(case.body, dict | list) else {}),
    ]
    if found and 200 <= response.status_code < 300:
        raise AssertionError(f"{case.operation.label} answered {response.status_code} to {', '.join(found)}")
    return None


CHECKS.append(no_2xx_for_an_identifier_with_a_control_character)


@pytest.fixture
def fuzzed_app(app_factory, config_factory):
    # Webhook secrets are set so the signature endpoints check signatures (an unset one refuses everything).
    # The lockout is lifted: generated requests with bad signatures would otherwise lock the client out and
    # every later answer would be the same 429.
    config = config_factory(
        github_webhook_secret=GITHUB_SECRET, gitlab_webhook_token=GITLAB_TOKEN, tracker_webhook_secret=TRACKER_SECRET
    )
    return app_factory(config, failures=FailedCredentials(limit=1_000_000))


@pytest.fixture
def fuzz_schema(fuzzed_app):
    from domain import accounts

    name, password = WORKER.split(":")
    accounts.add(name, "worker", password, passwords=PASSWORDS)
    config = SchemathesisConfig.from_dict(
        {
            # Credentials are set per operation below, not generated.
            # U+0000 is refused in every string (400, the document's description says why), never generated.
            "generation": {
                "max-examples": EXAMPLES,
                "deterministic": True,
                "with-security-parameters": False,
                "allow-x00": False,
                # Read here only where a negative case is drawn for an operation with nothing to make invalid (no
                # body, no parameter, a free-form path segment): with "negative" alone schemathesis says so at the
                # first draw (SkipTest), where with both it rejected each draw until Hypothesis gave up after some
                # 460 (Unsatisfiable): 2-3 s of CPU for each such operation and credential. Positive cases are
                # drawn as before (`fuzz` asks for each mode by name).
                "mode": "negative",
            },
            # A generated `If-Match` names no current version: 412 is the right answer to a valid body then,
            # as 409 is to a valid move the machine forbids (schemathesis's own list, with 412 added).
            "checks": {
                "positive_data_acceptance": {
                    "expected-statuses": ["2XX", "3XX", "401", "403", "404", "409", "412", "429", "5XX"]
                }
            },
        }
    )
    return schemathesis.openapi.from_wsgi("/api/v1/openapi.json", fuzzed_app, config=config)


MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)


def credentials_for(operation, mode: GenerationMode, *, as_worker: bool = False) -> dict[str, str]:
    """The credentials the operation's document asks for: right ones for basic (an operator's, or a worker's) and
    the CI secret; for the webhook signatures (a right one would have to be made over the generated bytes), a wrong
    signature with valid requests and none at all with invalid ones."""
    security = operation.definition.raw.get("security", [])
    names = {name for requirement in security for name in requirement}
    if "basic" in names:
        return {"Authorization": WORKER_HEADER if as_worker else BASIC_HEADER}
    if "ciSecret" in names:
        return {"X-Svc-CI-Secret": CI_SECRET}
    if mode == GenerationMode.NEGATIVE:
        return {}
    if "forgeSignature" in names:
        return {"X-Hub-Signature-256": "sha256=" + "0" * 64}
    if "trackerSignature" in names:
        return {"Linear-Signature": "0" * 64}
    return {}


def fuzz(operation, mode: GenerationMode, *, as_worker: bool = False, examples: int = EXAMPLES) -> None:
    """Up to `examples` generated requests of `mode` to `operation`; raises on the first bad answer."""
    headers = credentials_for(operation, mode, as_worker=as_worker)
    has_body = "requestBody" in operation.definition.raw and not operation.path.startswith("/api/v1/webhooks/")
    # A worker's valid body to another's endpoint is refused (403): acceptance is an operator's question there.
    accepts = mode == GenerationMode.POSITIVE and has_body and not as_worker
    checks = CHECKS + (ACCEPTANCE if accepts else [])

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=examples,
        derandomize=True,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],  # no shrinking: the first failing request is reported as it is
        suppress_health_check=list(HealthCheck),
    )
    def check(case):
        if case.headers and "Idempotency-Key" in case.headers:
            # A generated key repeats across examples with different bodies: the 422 the document promises then.
            case.headers["Idempotency-Key"] = uuid.uuid4().hex
        refused_by_ours = accepts and refused_by_our_keywords(operation, case.body)
        case.call_and_validate(headers=headers, checks=CHECKS if refused_by_ours else checks)

    try:
        check()
    except (Unsatisfiable, SkipTest):
        # Nothing to make invalid: no parameters and no body (GET /healthz), or only a free-form path segment.
        assert mode == GenerationMode.NEGATIVE, f"{operation.label}: no valid request could be generated"
    except UnsupportedSchema:
        # The envelope of POST events holds eleven cross-field rules (if/then), more than the generator models:
        # its valid requests are then the document's own examples, each of which must be accepted. Invalid ones
        # are still generated.
        examples = documented_examples(operation)
        assert mode == GenerationMode.POSITIVE and examples, f"{operation.label}: nothing to send"
        for body in examples:
            case = operation.Case(body=body, media_type="application/json")
            case.call_and_validate(headers=headers, checks=checks)


def refused_by_our_keywords(operation, body) -> bool:
    """A body the document's JSON Schema allows that one of our own keywords (`contracts.KEYWORDS`, which the
    generator does not model) refuses: two policy rules of one name (`x-unique-by`). Its 422 is the answer the
    document promises there; every other check still applies to it."""
    import contracts

    if not isinstance(body, dict):  # no body sent (an optional one), or not an object: nothing of ours applies
        return False
    ref = operation.definition.raw["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    name = ref.rsplit("/", 1)[-1] + ".json"
    if name not in contracts.schema_names() or contracts.conforms(name, body):
        return False
    plain = Draft202012Validator(
        contracts.load(name), registry=contracts.registry(), format_checker=contracts.format_checker()
    )
    return plain.is_valid(body)


def documented_examples(operation) -> list:
    """The `examples` of the operation's JSON request body schema (a `$ref` into components)."""
    ref = operation.definition.raw["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema = operation.schema.raw_schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    return schema.get("examples", [])


# The operations are dealt round-robin to these many tests, so parallel workers share the work; together they cover
# every operation of the document. The writing operations' shards run on PostgreSQL too (`make test`'s second pass):
# what they store, and refuse to store, is the database's to get right; the reading ones' answers do not depend on it.
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SHARDS = {"write": 6, "read": 4}


@pytest.mark.parametrize(
    ("kind", "shard"),
    [
        pytest.param(kind, shard, id=f"{kind}-{shard}", marks=[pytest.mark.both_backends] if kind == "write" else [])
        for kind, count in SHARDS.items()
        for shard in range(count)
    ],
)
def test_generated_requests_get_documented_answers_and_never_a_5xx(fuzz_schema, kind, shard):
    # Driven through Hypothesis directly (schemathesis's pytest plugin does not run under pytest 9); every
    # operation of this shard and mode runs, and every failure is reported together.
    failures = []
    operations = sorted((result.ok() for result in fuzz_schema.get_all_operations()), key=lambda o: o.label)
    assert len(operations) > 30
    ours = [o for o in operations if (o.method.upper() in WRITES) == (kind == "write")]
    for operation in ours[shard :: SHARDS[kind]]:
        for mode in MODES:
            try:
                fuzz(operation, mode)
            except (Exception, BaseExceptionGroup) as exc:
                failures.append(f"{operation.label} ({mode.value}): {exc}")
            if "basic" not in {n for r in operation.definition.raw.get("security", []) for n in r}:
                continue
            # Again as a worker: its own endpoints in full, the others briefly (each a 403).
            own = "x-svc-workers" in operation.definition.raw
            try:
                fuzz(operation, mode, as_worker=True, examples=EXAMPLES if own else WORKER_EXAMPLES)
            except (Exception, BaseExceptionGroup) as exc:
                failures.append(f"{operation.label} ({mode.value}, as a worker): {exc}")
    assert not failures, "\n\n".join(failures)
