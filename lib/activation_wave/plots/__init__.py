"""Figures of the study: library functions that take data and an optional ``ax`` and return the Figure.

``metrics`` draws chapters 1-5 (entropy, concatenation, CKA, filtering, selection);
``decoding`` the drafter and speculative-decoding chapters. Shared style: ``_style``.
"""

from .capture import *  # noqa: F401,F403
from .crossmodel import *  # noqa: F401,F403
from .metrics import *  # noqa: F401,F403
from .performance import *  # noqa: F401,F403

try:
    from .decoding import *  # noqa: F401,F403
except ImportError as err:  # only a missing decoding module is tolerated; its own bugs surface
    if getattr(err, "name", None) != f"{__name__}.decoding":
        raise
