"""``wave bench``: the study's benchmarks, each against a baseline measured in the same run.

``suite`` runs the entries and merges them into ``data/results/benchmarks.json``;
``pipeline_cost`` measures capture throughput, streaming memory and the whole profile;
``metric_speed`` the metric code at the study's size; ``speedup`` speculative decoding,
its lower-precision lever and how tau grows with the drafter's data; ``recipe`` which
training changes make the drafter stronger per CPU-minute. Their settings are
the ``bench`` section of the profile.
"""

from activation_wave.benchmarks.peak import PeakRSS  # noqa: F401
from activation_wave.benchmarks.suite import BENCHMARKS_FILE, entries, run_benchmarks  # noqa: F401
