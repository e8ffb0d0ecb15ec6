"""The external-cron examples stay in step with the agents' schedules and the ops runner's jobs."""

import re
from pathlib import Path

from clients.ops_runner import ENDPOINTS
from domain.ops.schedules import AGENTS

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "ci"
# cron -> (svc ops job, agent)
EXPECTED = {
    "0 8 * * *": ("pulse", "ops-daily-pulse"),
    "0 9 * * 1": ("digest", "ops-weekly-digest"),
    "0 4 * * *": ("idle-reclaim", "idle-reclaim"),
}


def test_the_schedules_are_the_agents_own():
    for cron, (job, agent) in EXPECTED.items():
        assert AGENTS[agent].schedule_text == cron
        assert job in ENDPOINTS


def test_github_actions_runs_each_job_on_its_cron():
    text = (EXAMPLES / "github-actions-ops.yml").read_text()
    assert set(re.findall(r'- cron: "([^"]+)"', text)) == set(EXPECTED)
    mapped = dict(re.findall(r'"([0-9* ]+)"\) JOB=([a-z-]+) ;;', text))
    assert mapped == {cron: job for cron, (job, _) in EXPECTED.items()}
    assert 'svc ops "$JOB"' in text


def test_gitlab_lists_each_schedule_and_runs_the_runner():
    text = (EXAMPLES / "gitlab-ci-ops.yml").read_text()
    listed = dict(re.findall(r"#   ([0-9* ]+?)\s{2,}([a-z-]+)\s", text))
    assert listed == {cron: job for cron, (job, _) in EXPECTED.items()}
    assert 'svc ops "$SVC_OPS_JOB"' in text
