import pytest

from leoguard.orbit import Constellation


@pytest.fixture(scope="session")
def starlink() -> Constellation:
    return Constellation.preset("starlink-shell1")


@pytest.fixture(scope="session")
def nyc_lon(starlink):
    """New York - London, 200 s at 100 ms under Starlink's global schedule (the issue's example)."""
    return starlink.path_timeline("New York", "London", duration=200, step=0.1)
