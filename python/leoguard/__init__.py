"""leoguard: concealing packet loss in LEO satellite networks.

The constellation engine lives in `leoguard.orbit`; places (cities, ground stations) in `leoguard.places`.
"""

from leoguard._core import __version__
from leoguard.errors import LeoguardError
from leoguard.orbit import Constellation, PathTimeline
from leoguard.places import Place, city, place, top_cities

__all__ = ["Constellation", "LeoguardError", "PathTimeline", "Place", "__version__", "city", "place", "top_cities"]
