"""Under `make test` the suite runs against the installed (non-editable) package: prove the wheel is whole."""

import os
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
