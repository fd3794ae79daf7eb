"""activation_wave: which decoder layers should an EAGLE-3 drafter read?

A small library behind the study's notebooks and its ``wave`` command line, one folder per
stage of the pipeline, in the order the book tells it (a lower folder never imports a
higher one; ``tests/test_import_graph.py`` checks it):

- ``core``: config, the layer-index convention, paths, hashing, statistics, results files, progress;
- ``models``: targets (aliases, GGUF, hub), prompts and responses, the capture cache, the draft model;
- ``engines``: what serving engines read and capture; llama.cpp as an optional engine;
- ``measure``: matrix entropy, CKA, token filtering, streaming statistics;
- ``select``: selection rules, stability, the probe, the report of ``wave select``;
- ``decode``: speculative decoding, kernels, offline replay, baselines, timing, the cost model;
- ``draft``: training drafters, and the experiment runner that trains many;
- ``plots``: the study's figures;
- ``study``: the pipeline's steps, one analysis per chapter, notebook execution, book glue;
- ``benchmarks``: ``wave bench``; ``cli``: ``wave``.
"""

__version__ = "0.1.0"
