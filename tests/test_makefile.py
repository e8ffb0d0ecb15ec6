"""The Makefile's install stamp: `make run` installs the service again only when something it is built from changed,
and the folders it watches are the packages pyproject.toml ships. Run on a copy of the Makefile in a scratch folder,
with a stand-in `.venv` that records what it is asked, so nothing here touches the real one."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_700_000_000  # every file's time, set outright: the test reads no clock

STAND_IN = """#!/bin/sh
echo "$(basename "$0") $*" >> "$(dirname "$0")/../../calls.log"
"""


def folders() -> list[str]:
    (line,) = re.findall(r"^PACKAGE_FOLDERS := (.*)$", (ROOT / "Makefile").read_text(), flags=re.M)
    return line.split()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    if not shutil.which("make"):
        pytest.skip("make is not installed")
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    for name in ("pyproject.toml", "README.md"):
        (tmp_path / name).write_text(name)
    for folder in folders():
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "module.py").write_text("")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for program in ("python", "svc"):
        (bin_dir / program).write_text(STAND_IN)
        (bin_dir / program).chmod(0o755)
    set_times(tmp_path, T0)
    return tmp_path


def set_times(root: Path, when: int) -> None:
    for path in [root, *root.rglob("*")]:
        os.utime(path, (when, when), follow_symlinks=False)


def make_run(checkout: Path) -> list[str]:
    """`make run`, and what it asked of the stand-in .venv (the install, then `svc run`)."""
    log = checkout / "calls.log"
    log.unlink(missing_ok=True)
    done = subprocess.run(["make", "--no-print-directory", "run"], cwd=checkout, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    log.unlink()
    return ["install" if "pip" in call and "install" in call else call for call in calls]


def test_make_run_installs_only_when_something_it_is_built_from_changed(checkout):
    assert make_run(checkout) == ["install", "svc run"]  # a fresh checkout: installed once
    set_times(checkout, T0)
    os.utime(checkout / ".venv" / ".installed", (T0 + 10, T0 + 10))
    assert make_run(checkout) == ["svc run"]  # nothing changed: straight to svc run

    os.utime(checkout / "api" / "module.py", (T0 + 20, T0 + 20))  # a file edited
    assert make_run(checkout) == ["install", "svc run"]
    set_times(checkout, T0)
    os.utime(checkout / ".venv" / ".installed", (T0 + 10, T0 + 10))

    os.utime(checkout / "pyproject.toml", (T0 + 20, T0 + 20))  # the project's own declaration
    assert make_run(checkout) == ["install", "svc run"]
    set_times(checkout, T0)
    os.utime(checkout / ".venv" / ".installed", (T0 + 10, T0 + 10))

    (checkout / "storage" / "module.py").unlink()  # a file removed: its folder's time moves
    os.utime(checkout / "storage", (T0 + 20, T0 + 20))
    assert make_run(checkout) == ["install", "svc run"]


def test_the_watched_folders_are_the_packages_the_wheel_ships():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    moved = setuptools.get("package-dir", {})
    shipped = {moved.get(package, package.replace(".", "/")).split("/")[0] for package in setuptools["packages"]}
    assert set(folders()) == shipped
