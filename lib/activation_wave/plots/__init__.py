"""Figures of the study: library functions that take data and an optional ``ax`` and return the Figure.

``metrics`` draws chapters 1-5 (entropy, concatenation, CKA, filtering, selection);
``decoding`` the drafter and speculative-decoding chapters. Shared style: ``_style``.
"""

from .metrics import *  # noqa: F401,F403

try:
    from .decoding import *  # noqa: F401,F403
except ImportError:  # decoding figures not written yet, or their optional deps missing
    pass
