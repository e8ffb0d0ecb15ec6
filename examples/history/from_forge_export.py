"""A forge's history as envelopes for `svc import`: pull requests and workflow runs as GitHub's REST API lists them,
or merge requests and pipelines as GitLab's does, each turned into the webhook delivery it stands for and normalized
by the service's own webhook normalizers (`domain/router/senders/`), so an imported event is the envelope the live
webhook would have made.

    # GitHub: GET /repos/{owner}/{repo}/pulls?state=all and GET /repos/{owner}/{repo}/actions/runs, every page
    python examples/history/from_forge_export.py --github-pulls pulls.json --github-runs runs.json \\
        --prefixes PORT > history.jsonl
    # GitLab: GET /projects/:id/merge_requests?state=all and GET /projects/:id/pipelines, every page
    python examples/history/from_forge_export.py --gitlab-merge-requests mrs.json --gitlab-pipelines pipelines.json \\
        --gitlab-project acme/portfolio --prefixes PORT > history.jsonl
    svc import history.jsonl

Each file is a JSON array of the list's items, or the pages one after another as JSON arrays (`gh api --paginate`
writes them so; GitHub's runs as `{"workflow_runs": [...]}` objects). What each item becomes:

| item | envelopes |
|---|---|
| a pull request / merge request | `opened` at its creation; `merged` or `closed` when it was |
| a workflow run / pipeline | `pipeline_started` at its start; `pipeline_passed`, `_failed`, `_skipped` when it ended |

A list holds each item as it is now, not every push: a pull request's pushes (`synchronized`) are not in it, and the
head commit is known only for the last event. A ticket is named by a key in the branch or the title whose prefix is
in `--prefixes` (default `SVC_TICKET_PREFIXES`), as the live webhooks name it; without one the subject is the pull
request or pipeline itself, which the scorecard does not judge. Event ids are made from the item (`github:export:...`),
so the same export imported twice is all duplicates. The envelopes are written in the order they occurred. Run it
with the Python that has `svc` installed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from domain.clock import parse_timestamp
from domain.router.senders import github, gitlab
from domain.router.senders.payloads import KnownKeys, PayloadError, Unmappable, known_prefixes

# A merge request pipeline runs on this ref, not on the branch.
_MERGE_REQUEST_REF = re.compile(r"^refs/merge-requests/([0-9]+)/(?:head|merge|train)$")
_FINISHED = {"success", "failed", "canceled", "skipped"}


def items(path: Path) -> list[dict[str, Any]]:
    """The items of one list export: an array, pages of arrays one after another, or GitHub's runs object(s)."""
    text = path.read_text(encoding="utf-8")
    decoder, found, at = json.JSONDecoder(), [], 0
    while at < len(text):
        if text[at].isspace():
            at += 1
            continue
        page, at = decoder.raw_decode(text, at)
        if isinstance(page, dict):
            page = page.get("workflow_runs", [])
        found.extend(item for item in page if isinstance(item, dict))
    return found


# -- GitHub ----------------------------------------------------------------------------------------------------------


def github_pull_request(pr: dict[str, Any], known: KnownKeys) -> Iterator[dict[str, Any]]:
    repo = ((pr.get("base") or {}).get("repo") or {}).get("full_name")
    merged_at = pr.get("merged_at")
    ident = f"github:export:{repo}#{pr.get('number')}"
    # Opened: the pull request as it was then (its head commit then is not in the list).
    opened = {**pr, "updated_at": pr.get("created_at"), "head": {**(pr.get("head") or {}), "sha": None}}
    yield _github("pull_request", f"{ident}:opened", "opened", opened, repo, pr.get("user"), known)
    if merged_at:
        merged = {**pr, "merged": True}
        sender = pr.get("merged_by") or pr.get("user")
        yield _github("pull_request", f"{ident}:merged", "closed", merged, repo, sender, known)
    elif pr.get("closed_at"):
        closed = {**pr, "merged": False, "merge_commit_sha": None}
        yield _github("pull_request", f"{ident}:closed", "closed", closed, repo, pr.get("user"), known)


def github_workflow_run(run: dict[str, Any], known: KnownKeys) -> Iterator[dict[str, Any]]:
    repo = (run.get("repository") or {}).get("full_name")
    ident = f"github:export:{repo}:run-{run.get('id')}.{run.get('run_attempt') or 1}"
    started = {**run, "status": "in_progress", "conclusion": None}
    started["updated_at"] = run.get("run_started_at") or run.get("created_at")
    yield _github("workflow_run", f"{ident}:started", "in_progress", started, repo, None, known, key="workflow_run")
    if run.get("status") == "completed" and run.get("conclusion"):
        yield _github("workflow_run", f"{ident}:completed", "completed", run, repo, None, known, key="workflow_run")


def _github(
    event: str,
    ident: str,
    action: str,
    item: dict[str, Any],
    repo: str | None,
    sender: Any,
    known: KnownKeys,
    *,
    key: str = "pull_request",
) -> dict[str, Any]:
    """The delivery GitHub would have sent for `item`, normalized as the webhook normalizes it."""
    payload: dict[str, Any] = {"action": action, key: item, "repository": {"full_name": repo}}
    if sender is not None:
        payload["sender"] = sender
    return github.normalize(event, ident, payload, known=known)


# -- GitLab ----------------------------------------------------------------------------------------------------------


def gitlab_merge_request(mr: dict[str, Any], project: str | None, known: KnownKeys) -> Iterator[dict[str, Any]]:
    repo = _project_of(mr, project)
    ident = f"gitlab:export:{repo}!{mr.get('iid')}"
    attributes = {
        "iid": mr.get("iid"),
        "title": mr.get("title"),
        "source_branch": mr.get("source_branch"),
        "draft": mr.get("draft") is True or mr.get("work_in_progress") is True,
    }
    opened = {**attributes, "action": "open", "updated_at": mr.get("created_at")}
    yield _gitlab(f"{ident}:opened", "merge_request", opened, repo, {"user": mr.get("author")}, known)
    head = {"last_commit": {"id": mr.get("sha")}}
    if mr.get("state") == "merged" or mr.get("merged_at"):
        merged = {**attributes, **head, "action": "merge", "updated_at": mr.get("merged_at") or mr.get("updated_at")}
        merged["merge_commit_sha"] = mr.get("merge_commit_sha") or mr.get("squash_commit_sha")
        user = mr.get("merge_user") or mr.get("merged_by") or mr.get("author")
        yield _gitlab(f"{ident}:merged", "merge_request", merged, repo, {"user": user}, known)
    elif mr.get("state") == "closed" or mr.get("closed_at"):
        closed = {**attributes, **head, "action": "close", "updated_at": mr.get("closed_at") or mr.get("updated_at")}
        user = mr.get("closed_by") or mr.get("author")
        yield _gitlab(f"{ident}:closed", "merge_request", closed, repo, {"user": user}, known)


def gitlab_pipeline(
    pipeline: dict[str, Any], project: str | None, requests: dict[tuple[str | None, Any], dict], known: KnownKeys
) -> Iterator[dict[str, Any]]:
    repo = _project_of(pipeline, project)
    ident = f"gitlab:export:{repo}:pipeline-{pipeline.get('id')}"
    ref = pipeline.get("ref")
    by_ref = _MERGE_REQUEST_REF.match(ref) if isinstance(ref, str) else None
    mr = requests.get((repo, int(by_ref.group(1)))) if by_ref else requests.get((repo, ref))
    extra = {"merge_request": mr} if mr else {}
    attributes = {"id": pipeline.get("id"), "ref": ref, "sha": pipeline.get("sha")}
    started = {
        **attributes,
        "status": "running",
        "created_at": pipeline.get("started_at") or pipeline.get("created_at"),
    }
    yield _gitlab(f"{ident}:started", "pipeline", started, repo, extra, known)
    if pipeline.get("status") in _FINISHED:
        finished = {
            **attributes,
            "status": pipeline["status"],
            "finished_at": pipeline.get("finished_at") or pipeline.get("updated_at"),
        }
        yield _gitlab(f"{ident}:finished", "pipeline", finished, repo, extra, known)


def _project_of(item: dict[str, Any], project: str | None) -> str | None:
    """The project's path: what a merge request's `references.full` says (`group/project!12`), else
    `--gitlab-project`."""
    full = (item.get("references") or {}).get("full")
    return full.rsplit("!", 1)[0] if isinstance(full, str) and "!" in full else project


def _gitlab(ident: str, kind: str, attributes: dict, repo: str | None, extra: dict, known: KnownKeys) -> dict[str, Any]:
    """The hook GitLab would have sent, normalized as the webhook normalizes it."""
    payload = {"object_kind": kind, "object_attributes": attributes, "project": {"path_with_namespace": repo}, **extra}
    return gitlab.normalize(ident, payload, known=known)


# -- the command -----------------------------------------------------------------------------------------------------


def envelopes(args: argparse.Namespace, err) -> Iterator[dict[str, Any]]:
    known = known_prefixes(p.strip() for p in args.prefixes.split(",") if p.strip())
    made: list[Iterator[dict[str, Any]]] = []
    for pr in items(args.github_pulls) if args.github_pulls else ():
        made.append(github_pull_request(pr, known))
    for run in items(args.github_runs) if args.github_runs else ():
        made.append(github_workflow_run(run, known))
    merge_requests = items(args.gitlab_merge_requests) if args.gitlab_merge_requests else []
    requests: dict[tuple[str | None, Any], dict] = {}
    for mr in sorted(merge_requests, key=lambda m: str(m.get("created_at"))):
        hook = {"iid": mr.get("iid"), "title": mr.get("title"), "source_branch": mr.get("source_branch")}
        repo = _project_of(mr, args.gitlab_project)
        requests[(repo, mr.get("iid"))] = requests[(repo, mr.get("source_branch"))] = hook
        made.append(gitlab_merge_request(mr, args.gitlab_project, known))
    for pipeline in items(args.gitlab_pipelines) if args.gitlab_pipelines else ():
        made.append(gitlab_pipeline(pipeline, args.gitlab_project, requests, known))
    for events in made:
        try:
            yield from events
        except (PayloadError, Unmappable) as exc:
            err.write(f"from_forge_export: left out an item: {exc}\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--github-pulls", type=Path, metavar="FILE", help="GET /repos/{o}/{r}/pulls?state=all")
    parser.add_argument("--github-runs", type=Path, metavar="FILE", help="GET /repos/{o}/{r}/actions/runs")
    parser.add_argument("--gitlab-merge-requests", type=Path, metavar="FILE", help="GET /projects/:id/merge_requests")
    parser.add_argument("--gitlab-pipelines", type=Path, metavar="FILE", help="GET /projects/:id/pipelines")
    parser.add_argument("--gitlab-project", metavar="GROUP/PROJECT", help="the project's path, for its pipelines")
    parser.add_argument(
        "--prefixes",
        default=os.environ.get("SVC_TICKET_PREFIXES", ""),
        help="ticket key prefixes, comma-separated (default SVC_TICKET_PREFIXES)",
    )
    args = parser.parse_args()
    made = list(envelopes(args, sys.stderr))
    made.sort(key=lambda envelope: parse_timestamp(envelope["occurred_at"]))
    for envelope in made:
        sys.stdout.write(json.dumps(envelope, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
