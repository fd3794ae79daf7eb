"""activation_wave: which decoder layers should an EAGLE-3 drafter read?

A small library behind the study's notebooks and its ``wave`` command line.
One module per concept: ``layers`` (index convention), ``config``, ``models``,
``data``, ``capture``, ``entropy``, ``cka``, ``filtering``, ``selection``,
``drafter``, ``records``, ``training``, ``experiment``; decoding: ``decoding`` (results,
shared plumbing), ``speculative`` (the loop), ``baselines``, ``kernels``, ``offline``,
``timing``, ``costs`` (the cost model), ``comparison`` (the online comparison);
``chapters`` (one analysis per chapter), ``benchmarks``, ``plots``, ``cli``.
"""

__version__ = "0.1.0"
