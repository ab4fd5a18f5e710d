"""leoguard: concealing packet loss in LEO satellite networks.

The constellation engine lives in `leoguard.orbit`; places (cities, ground stations) in `leoguard.places`.
The names below are imported on first use, so `import leoguard` (and `leoguard --help`) stays fast: the
constellation engine pulls in polars and numpy.
"""

from typing import TYPE_CHECKING, Any

from leoguard._core import __version__
from leoguard.errors import LeoguardError

if TYPE_CHECKING:
    from leoguard.orbit import Constellation, PathTimeline
    from leoguard.places import Place, city, place, top_cities

__all__ = ["Constellation", "LeoguardError", "PathTimeline", "Place", "__version__", "city", "place", "top_cities"]

_LAZY = {
    "Constellation": "leoguard.orbit",
    "PathTimeline": "leoguard.orbit",
    "Place": "leoguard.places",
    "city": "leoguard.places",
    "place": "leoguard.places",
    "top_cities": "leoguard.places",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'leoguard' has no attribute {name!r}")
