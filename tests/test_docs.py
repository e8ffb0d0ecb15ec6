"""The manual keeps up with the code: every variable the configuration reads is documented, and every relative
link in the README and `docs/` leads to a file (and a heading) that exists."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from domain import config as config_module
from domain.config import Config

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)|<img [^>]*src=\"([^\"]+)\"")


class _RecordingEnvironment(dict):
    """An empty environment that remembers every name the configuration asks it for."""

    def __init__(self):
        super().__init__()
        self.asked: set[str] = set()

    def get(self, name, default=None):
        self.asked.add(name)
        return super().get(name, default)

    def __getitem__(self, name):
        self.asked.add(name)
        return super().__getitem__(name)

    def __contains__(self, name):
        self.asked.add(name)
        return super().__contains__(name)


def variables_the_configuration_reads() -> set[str]:
    environment = _RecordingEnvironment()
    Config.from_env(environment)
    # Names read only on some paths would not be asked for by an empty environment: take the source's too.
    source = inspect.getsource(config_module)
    written = set(re.findall(r"env\.\w+\(\s*\"([A-Z][A-Z0-9_]+)\"", source))
    return environment.asked | written


def test_every_variable_the_configuration_reads_is_documented():
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)(?:=[^`]*)?`", (ROOT / "docs/configuration.md").read_text()))
    read = variables_the_configuration_reads()
    assert len(read) > 20, read  # the recording saw the configuration at work
    assert read - documented == set(), "read by domain/config.py but missing from docs/configuration.md"


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    anchors = set()
    in_code = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def _links(page: Path) -> list[str]:
    found = []
    in_code = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        if not in_code:
            found += [next(g for g in groups if g) for groups in _LINK.findall(line)]
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_somewhere(page: Path):
    broken = []
    for link in _links(page):
        if re.match(r"^[a-z]+:", link):  # http:, https:, mailto:
            continue
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            broken.append(f"{link}: no file {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{link}: no heading #{anchor} in {path.relative_to(ROOT)}")
    assert broken == []


def test_the_manual_is_linked_from_the_readme():
    readme_links = {link.partition("#")[0] for link in _links(ROOT / "README.md")}
    pages = {f"docs/{page.name}" for page in PAGES if page.parent.name == "docs"}
    assert pages - readme_links == set(), "a page of docs/ that the README does not lead to"


# `svc` at a command's start: a line's start, after a pipe, or after VAR=value assignments.
_BARE_SVC = re.compile(r"(^|\|\s*|^(?:[A-Z_]+=\S+\s+)+)svc\s")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_svc_command_a_reader_copies_runs_as_written(page: Path):
    """`make run` puts `svc` in .venv/bin, not on PATH: a command in a shell block says `.venv/bin/svc`."""
    bare = []
    in_code = in_shell = False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
            in_shell = in_code and line[3:].strip() in {"sh", "bash", "console", ""}
            continue
        if in_shell and not line.lstrip().startswith("#") and _BARE_SVC.search(line.strip()):
            bare.append(f"{number}: {line}")
    assert not bare, "write .venv/bin/svc:\n" + "\n".join(bare)


# A command with options in running text (`svc outbox --kind chat`) is copied as often as one in a shell block.
_INLINE_SVC_WITH_OPTIONS = re.compile(r"`svc [^`]*\s--[a-z][^`]*`")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_svc_command_with_options_in_the_text_runs_as_written(page: Path):
    bare = [
        f"{n}: {m}"
        for n, line in enumerate(page.read_text().splitlines(), 1)
        for m in _INLINE_SVC_WITH_OPTIONS.findall(line)
    ]
    assert not bare, "write .venv/bin/svc:\n" + "\n".join(bare)
