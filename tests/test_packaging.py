"""Under `make test` the suite runs against the installed (non-editable) package: prove the wheel is whole, and that
building it prints no warning of ours."""

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib import resources
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ["svc", "machines", "contracts", "storage", "integrations", "jobs", "api"]

installed_run = pytest.mark.skipif(
    os.environ.get("SVC_TEST_INSTALLED") != "1",
    reason="packaging checks run under `make test`, which installs the project into .venv first",
)


@installed_run
@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_is_imported_from_the_installed_wheel(package):
    module = __import__(package)
    location = Path(module.__file__).resolve()
    assert "site-packages" in location.parts, f"{package} was not imported from an installed wheel: {location}"
    assert not location.is_relative_to(REPO / package), f"{package} was imported from the working tree"


@installed_run
def test_every_schema_file_is_inside_the_wheel():
    shipped = {entry.name for entry in resources.files("contracts").iterdir() if entry.name.endswith(".json")}
    in_repo = {p.name for p in (REPO / "contracts").glob("*.json")}
    assert in_repo and in_repo <= shipped


# A warning of the build backend, as Python prints one: `path:line: SomeWarning: message` (pip's own notes about
# the machine's package indexes are `WARNING: ...`, not ours).
_BACKEND_WARNING = re.compile(r"\b\w*Warning: |Package would be ignored")


def test_the_wheel_builds_without_a_warning_of_ours_and_ships_every_data_file(tmp_path):
    """`pip install .` printed nine setuptools "Package would be ignored" blocks for the data folders; declared the
    way setuptools asks, the build prints none, and the wheel still holds every file the service reads."""
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    moved = setuptools["package-dir"]
    source = tmp_path / "checkout"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for folder in {folder_of(p, moved).split("/")[0] for p in setuptools["packages"]}:
        shutil.copytree(REPO / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(tmp_path / "wheel"), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    warnings = [line for line in (built.stdout + built.stderr).splitlines() if _BACKEND_WARNING.search(line)]
    assert warnings == []
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    wanted = set()
    for package, patterns in setuptools["package-data"].items():
        folder = REPO / folder_of(package, moved)
        for pattern in patterns:
            for path in folder.glob(pattern):
                if path.is_file():
                    wanted.add(package.replace(".", "/") + "/" + str(path.relative_to(folder)))
    assert len(wanted) > 100  # the schemas, the frozen schema versions, the templates, the examples
    assert wanted - shipped == set()


def folder_of(package: str, moved: dict[str, str]) -> str:
    """Where `package` lives in the checkout: its own folder, or under the one `package-dir` gives a parent."""
    for parent in sorted(moved, key=len, reverse=True):
        if package == parent or package.startswith(parent + "."):
            return moved[parent] + package[len(parent) :].replace(".", "/")
    return package.replace(".", "/")
