#!/usr/bin/env python
"""Generate the data-scale design's corpus responses (its slow first step), resumably.

    .venv/bin/python scripts/generate_corpus_responses.py                 # default profile: 2 servers, 1 thread each
    .venv/bin/python scripts/generate_corpus_responses.py --servers 1     # leave a core to other work

Writes the same cache file `wave bench --only data_scale` reads (greedy llama.cpp responses, one
request at a time; needs scripts/setup_llamacpp.sh); an interrupted run continues where it
stopped. To commit them: gzip -9n the printed file into data/responses/ (a fresh clone then
never generates them).
"""

from __future__ import annotations

import argparse

from activation_wave.benchmarks.data_scale import generate_corpus_responses
from activation_wave.core.config import load_config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="default", choices=["smoke", "default", "paper"])
    ap.add_argument("--threads", type=int, default=1, help="threads per llama-server (default 1: robust on a busy CPU)")
    ap.add_argument("--servers", type=int, default=2, help="llama-servers sharing the work (default 2)")
    args = ap.parse_args()
    for name in ("threads", "servers"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    print(generate_corpus_responses(load_config(args.profile, {"data.engine_threads": args.threads,
                                                               "data.engine_servers": args.servers})))


if __name__ == "__main__":
    main()
