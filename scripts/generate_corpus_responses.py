#!/usr/bin/env python
"""Generate the data-scale design's corpus responses (its slow first step), resumably.

    .venv/bin/python scripts/generate_corpus_responses.py                 # default profile, 1 llama.cpp thread
    .venv/bin/python scripts/generate_corpus_responses.py --threads 2     # an idle machine

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
    ap.add_argument("--threads", type=int, default=1, help="llama-server threads (default 1: robust on a busy CPU)")
    args = ap.parse_args()
    if args.threads < 1:
        ap.error(f"--threads must be at least 1, got {args.threads}")
    print(generate_corpus_responses(load_config(args.profile, {"data.engine_threads": args.threads})))


if __name__ == "__main__":
    main()
