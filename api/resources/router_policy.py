"""The router's policy over HTTP (its versions: `domain/router/policy_versions.py`): `GET/PUT router/policy` and
`GET router/policy/history`. Everyone with credentials reads it; an operator changes it, naming the version the
change was decided on (`If-Match`, required)."""

from __future__ import annotations

import falcon

from api import conditional, params, representations
from api.operations import CURSOR, LIMIT, Operation
from domain.errors import NotFound
from domain.policy.document import MAX_RULES
from domain.router import policy_versions


class RouterPolicy:
    operations = {
        "GET": Operation(
            "The router's policy in force: its rules and knobs, its version (the ETag), who set it, when and why",
            responses={200: "router-policy-version.json", 404: "problem.json"},
            tags=("router",),
            etag=True,
        ),
        "PUT": Operation(
            "Make a new policy the one in force, from the next routed event on in every process. Send the ETag of "
            "the version it was decided on as If-Match (required). The whole document is checked against its schema "
            f"(an unknown path, matcher or role, two rules of one name, more than {MAX_RULES} rules: 422, one error "
            "per violation with its JSON pointer); a document equal to the one in force is answered 200 and no new "
            "version is stored. `force` (a reason) is recorded with the version",
            request="router-policy-put.json",
            responses={200: "router-policy-version.json", 409: "problem.json"},
            response_notes={
                409: "The change makes a rule live that has not earned it (problem type `.../not-earned`): over the "
                "last SVC_PROMOTION_DAYS days under its present version, fewer than SVC_PROMOTION_MIN_SETTLED settled "
                "decisions, or the low end of its agreement's Wilson 95 % interval below "
                "SVC_PROMOTION_MIN_AGREEMENT. `evidence` has each refused rule's `settled`, `low`, `required_settled` "
                "and `required_low`; send `force` (a reason) to adopt it anyway",
            },
            tags=("router",),
            if_match=True,
            if_match_required=True,
        ),
    }

    def __init__(self, clock, thresholds: policy_versions.Thresholds):
        self.clock = clock
        self.thresholds = thresholds

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        current = policy_versions.current()
        if current is None:
            raise NotFound("router policy", "in force")
        self._answer(resp, current)

    def on_put(self, req: falcon.Request, resp: falcon.Response) -> None:
        body = req.context.body
        adoption = policy_versions.adopt(
            body["policy"],
            reason=body["reason"],
            force=body.get("force"),
            actor=req.context.identity.actor,
            if_match=conditional.if_match(req),
            clock=self.clock,
            thresholds=self.thresholds,
        )
        self._answer(resp, adoption.current)

    @staticmethod
    def _answer(resp: falcon.Response, version: policy_versions.PolicyVersion) -> None:
        conditional.tag(resp, version.tag)
        resp.media = representations.policy_version(version)


class RouterPolicyHistory:
    operations = {
        "GET": Operation(
            "The versions of the router's policy, newest first (the first is the one in force), each with who set "
            "it, when and why",
            responses={200: "router-policy-history.json"},
            params=(LIMIT, CURSOR),
            tags=("router",),
        ),
    }

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        found, after = policy_versions.history(limit=params.limit(req), cursor=params.cursor(req))
        resp.media = representations.page("versions", [representations.policy_version(v) for v in found], after)


def routes(services) -> list[tuple[str, object]]:
    return [
        (
            "/api/v1/router/policy",
            RouterPolicy(services.clock, policy_versions.Thresholds.from_config(services.config)),
        ),
        ("/api/v1/router/policy/history", RouterPolicyHistory()),
    ]
