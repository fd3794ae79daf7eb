"""activation_wave: which decoder layers should an EAGLE-3 drafter read?

A small library behind the study's notebooks and its ``wave`` command line.
One module per concept: ``layers`` (index convention), ``config``, ``models``,
``data``, ``capture``, ``entropy``, ``cka``, ``filtering``, ``selection``,
``drafter``, ``training``, ``speculative``, ``plots``, ``cli``.
"""

__version__ = "0.1.0"
