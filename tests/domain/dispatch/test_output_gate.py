"""The output gate's rules of the worker boundary, case by case: a branch bound to the job's ticket and valid as git
has it (each case held against `git check-ref-format --branch` itself, where git is installed), and drafts only."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from domain.dispatch.output_gate import BRANCH_BYTES_MAX, branch_problems, git_branch_problems, violations

GIT = shutil.which("git")

# (branch, why it is refused, or None when it is the branch of a job for NL-1 under the prefix svc/)
BRANCHES = [
    ("svc/NL-1", None),
    ("svc/nl-1", None),
    ("svc/Nl-1/fix-the-login", None),
    ("svc/NL-1/a/b.c", None),
    ("svc/NL-1/x@y", None),
    ("", "empty"),
    ("svc/", "NL-1"),
    ("svc/NL-12", "NL-1"),
    ("svc/NL-1-work", "NL-1"),
    ("svc/NL-2", "NL-1"),
    ("NL-1", "NL-1"),
    ("main", "NL-1"),
    ("SVC/NL-1", "NL-1"),
    ("svc/\ufb00-1", "NL-1"),  # "ﬀ" upper-cases to "FF": no key of "FF-1"
    ("svc/../main", "NL-1"),
    ("svc/NL-1/../main", "'..'"),
    ("svc//main", "NL-1"),
    ("svc/NL-1//x", "'//'"),
    ("svc/NL-1/x.lock", "'.lock'"),
    ("svc/NL-1.lock", "NL-1"),
    ("svc/x.lock", "'.lock'"),
    ("svc/NL-1/.hidden", "start with '.'"),
    ("svc/NL-1/", "end with '/'"),
    ("svc/NL-1/x.", "end with '.'"),
    ("svc/NL-1\n", "U+000A"),
    ("svc/NL-1/a\tb", "U+0009"),
    ("svc/NL-1/a\x7fb", "U+007F"),
    ("svc/NL-1/a b", "U+0020"),
    ("svc/NL-1/a~1", "'~'"),
    ("svc/NL-1/a^1", "'^'"),
    ("svc/NL-1/a:b", "':'"),
    ("svc/NL-1/a?", "'?'"),
    ("svc/NL-1/a*", "'*'"),
    ("svc/NL-1/a[b", "'['"),
    ("svc/NL-1/a\\b", "'\\\\'"),
    ("svc/NL-1/a@{1}", "'@{'"),
    ("svc/NL-1/" + "x" * (BRANCH_BYTES_MAX - 9), None),
    ("svc/NL-1/" + "x" * (BRANCH_BYTES_MAX - 8), "bytes"),
    ("svc/NL-1/" + "é" * 96, "bytes"),  # 192 bytes of é: 201 in all, though 105 characters
]


@pytest.mark.parametrize(("branch", "refusal"), BRANCHES)
def test_a_branch_is_bound_to_its_ticket_and_a_valid_git_branch_name(branch, refusal):
    problems = branch_problems(branch, ticket="NL-1", prefix="svc/")
    if refusal is None:
        assert problems == []
    else:
        assert problems and any(refusal in problem for problem in problems), problems


@pytest.mark.skipif(GIT is None, reason="git is not installed: the cases are not held against git check-ref-format")
@pytest.mark.parametrize(("branch", "refusal"), BRANCHES)
def test_git_itself_agrees_with_each_case(branch, refusal):
    git = subprocess.run([GIT, "check-ref-format", "--branch", branch], capture_output=True, text=True)
    assert (git.returncode == 0) == (git_branch_problems(branch) == []), (branch, git.stderr)


@pytest.mark.parametrize(
    ("asked", "refused"),
    [
        ({"title": "t", "body": "b"}, False),
        ({"title": "t", "body": "b", "draft": True}, False),
        ({"title": "t", "body": "b", "draft": False}, True),
    ],
)
def test_the_service_opens_drafts_only(asked, refused):
    found = violations({"branch": "svc/NL-1", "pull_request": asked}, ticket="NL-1", prefix="svc/")
    assert [v.path for v in found] == (["/pull_request/draft"] if refused else [])


def test_another_prefix_binds_the_same_way():
    assert branch_problems("bots/port-12/x", ticket="PORT-12", prefix="bots/") == []
    assert branch_problems("svc/PORT-12", ticket="PORT-12", prefix="bots/")
