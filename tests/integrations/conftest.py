import pytest

from servers.staging import Certificates


@pytest.fixture(scope="session")
def certificates(tmp_path_factory) -> Certificates:
    return Certificates(tmp_path_factory.mktemp("certificates"))
