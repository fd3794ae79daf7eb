"""``wave``: one command line, a subcommand per step of the study.

    wave info      [--model M]                       the model, its layers, the EAGLE-3 default
    wave capture   --model M --profile P             prompts -> responses -> hidden-state cache
    wave select    --model M [--k 3] [--method X]    which layers should a drafter read?
    wave train-draft --model M --layers 2,15,27 --out DIR
    wave speculate --model M --draft DIR --prompts FILE
    wave export    --engine llamacpp --draft DIR --out FILE.gguf   (needs scripts/setup_llamacpp.sh)
    wave study     --profile P                       every chapter, then the book
    wave bench                                       benchmarks -> data/results/benchmarks.json
    wave dry-run   --profile paper --model M         estimated memory / disk / time, no weights

Every step takes ``--profile`` and ``--set section.key=value`` overrides; see
``wave <step> --help``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .config import PROFILES, ConfigError, load_config, parse_overrides


def _config(args: argparse.Namespace, **extra: Any):
    overrides = parse_overrides(getattr(args, "set", None))
    overrides.update({k: v for k, v in extra.items() if v is not None})
    return load_config(args.profile, overrides, model=args.model)


def _add_common(p: argparse.ArgumentParser, *, model_default: str | None = None) -> None:
    p.add_argument("--model", default=model_default,
                   help="alias (smollm2-135m, gemma3-270m), hub id, local folder or .gguf file "
                        "(default: the profile's model)")
    p.add_argument("--profile", default="smoke", choices=PROFILES, help="run profile (default: smoke)")
    p.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE",
                   help="override one config value, e.g. --set capture.batch_size=4 (repeatable)")


def cmd_info(args: argparse.Namespace) -> int:
    from .layers import eagle3_default_layers, to_convention
    from .models import cache_root, load_target

    cfg = _config(args)
    t = load_target(cfg.model)
    n = t.n_layers
    print(f"model            {cfg.model}  (fingerprint {t.fingerprint})")
    print(f"source           {t.provenance}")
    print(f"decoder blocks   N = {n}; hidden size {t.hidden_size}; vocab {t.vocab_size}")
    print(f"layer indices    0..{n} (hidden_states: 0 = embeddings, i = output of block i-1, {n} = last block, pre-norm)")
    try:
        d = eagle3_default_layers(n)
        print(f"EAGLE-3 default  {d} (hidden_states / vLLM); SpecForge/SGLang ids {to_convention(d, 'specforge')}")
    except ValueError as exc:
        print(f"EAGLE-3 default  undefined: {exc}")
    print(f"caches           {cache_root()}  (set WAVE_CACHE to move them)")
    return 0


def cmd_capture(args: argparse.Namespace) -> int:
    from .pipeline import run_capture

    cfg = _config(args)
    cap = run_capture(cfg, regenerate=args.regenerate)
    print(f"responses  {cap.responses_path}")
    print(f"capture    {cap.cache.path}")
    print(f"summary    {cap.cache.summary()}")
    return 0


def cmd_select(args: argparse.Namespace) -> int:
    from .pipeline import run_capture
    from .selection import select_for_cli

    cfg = _config(args, **{"select.k": args.k, "select.method": args.method})
    cap = run_capture(cfg, progress=not args.json)
    out = select_for_cli(cap, cfg)
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(out["table"])
        print(f"\nselected ({out['method']}, k={len(out['selected'])}): {out['selected']}   "
              f"EAGLE-3 default: {out['default']}")
        for engine, snippet in out["exports"].items():
            print(f"  {engine:10s} {snippet}")
        _print_engine_warnings(out["engine_warnings"])
    return 0


def _print_engine_warnings(warnings: list[str]) -> None:
    """Say which engines cannot load a drafter on the chosen layers (activation_wave.engines)."""
    if warnings:
        print("engines that cannot load a drafter on these layers (or would feed it other tensors):")
        for w in warnings:
            print(f"  ! {w}")


def _layers(text: str) -> list[int]:
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--layers {text!r}: expected comma-separated integers like 2,15,27") from None


def cmd_train_draft(args: argparse.Namespace) -> int:
    from .layers import check_layers
    from .pipeline import run_capture
    from .training import train_drafter

    cfg = _config(args)
    cap = run_capture(cfg)
    layers = check_layers(args.layers, cap.target.n_layers, what="--layers")
    out = train_drafter(cap.target, cap.cache, layers, cfg.draft, Path(args.out))
    print(f"drafter    {out}")
    from .engines import engine_report

    config = getattr(cap.target.model.config, "text_config", None) or cap.target.model.config
    rep = engine_report(layers, cap.target.n_layers, model_type=str(config.model_type))
    print(f"engines    loadable by {', '.join(e for e, r in rep.items() if r['ok']) or 'none'}")
    _print_engine_warnings([f"{e}: {p}" for e, r in rep.items() for p in r["problems"]])
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .llamacpp import export_llamacpp
    from .pipeline import get_target

    target = get_target(_config(args))
    out = export_llamacpp(args.draft, args.out, target, outtype=args.outtype)
    print(f"gguf       {out}  ({out.stat().st_size / 2**20:.1f} MiB, {args.outtype})")
    print(f"serve      llama-server -m <target .gguf> -md {out} --spec-type draft-eagle3")
    return 0


def cmd_speculate(args: argparse.Namespace) -> int:
    from .data import chat_ids, read_prompt_jsonl
    from .drafter import load_drafter
    from .pipeline import get_target
    from .speculative import speculate

    cfg = _config(args, **{"spec.temperature": args.temperature, "spec.max_new_tokens": args.max_new_tokens})
    prompts = read_prompt_jsonl(args.prompts)
    target = get_target(cfg)
    drafter = load_drafter(args.draft, target)
    res = speculate(target, drafter, [chat_ids(target, p.text) for p in prompts], cfg.spec, ids=[p.id for p in prompts])
    doc = res.to_json()
    if args.json:
        print(json.dumps(doc))
    else:
        print(f"tau {doc['tau']:.3f}  tokens/s {doc['tokens_per_s']:.1f}  acceptance by position "
              + " ".join(f"{a:.2f}" for a in doc["acceptance_by_position"]))
    return 0


def cmd_study(args: argparse.Namespace) -> int:
    from .study import run_study

    return run_study(profile=args.profile, model=args.model, book_dir=args.book_dir, only=args.only,
                     build=not args.no_build, overrides=parse_overrides(args.set))


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench import run_benchmarks

    run_benchmarks(out=Path(args.out), only=args.only)
    return 0


def cmd_dry_run(args: argparse.Namespace) -> int:
    from .estimate import dry_run

    cfg = _config(args)
    print(json.dumps(dry_run(cfg), indent=1) if args.json else dry_run(cfg, text=True))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wave", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="STEP")

    p = sub.add_parser("info", help="model, layers, EAGLE-3 default, cache location")
    _add_common(p)
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("capture", help="generate responses and capture every layer's hidden states (cached)")
    _add_common(p)
    p.add_argument("--regenerate", action="store_true", help="regenerate responses even if cached or committed")
    p.set_defaults(func=cmd_capture)

    p = sub.add_parser("select", help="choose the layers an EAGLE-3 drafter should read")
    _add_common(p)
    p.add_argument("--k", type=int, default=None, help="number of layers (default: profile, 3)")
    p.add_argument("--method", default=None, help="selection method (default: profile's; see the book, chapter 5)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_select)

    p = sub.add_parser("train-draft", help="train an EAGLE-3-style draft head on given layers")
    _add_common(p)
    p.add_argument("--layers", type=_layers, required=True, help="hidden_states indices, e.g. 2,15,27")
    p.add_argument("--out", required=True, help="output folder for the checkpoint")
    p.set_defaults(func=cmd_train_draft)

    p = sub.add_parser("speculate", help="lossless speculative decoding with a trained drafter")
    _add_common(p)
    p.add_argument("--draft", required=True, help="drafter folder written by train-draft")
    p.add_argument("--prompts", required=True, help="JSONL file, one {\"prompt\": ...} per line")
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--max-new-tokens", type=int, default=None)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_speculate)

    p = sub.add_parser("export", help="convert a drafter for a serving engine (llama.cpp: a .gguf)")
    _add_common(p)
    p.add_argument("--engine", required=True, choices=["llamacpp"], help="engine to export for")
    p.add_argument("--draft", required=True, help="drafter folder written by train-draft")
    p.add_argument("--out", required=True, help="output .gguf file (the target folder goes next to it)")
    p.add_argument("--outtype", default="f16", choices=["f32", "f16", "bf16", "q8_0"],
                   help="drafter weight type in the .gguf (default: f16)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("study", help="run every chapter notebook (papermill) and build the book")
    _add_common(p)
    p.add_argument("--book-dir", default=None, help="where executed chapters and the book go "
                   "(default: book/ for the default profile, scratch/<profile>/book otherwise)")
    p.add_argument("--only", action="append", help="run only these notebooks (name prefix, repeatable)")
    p.add_argument("--no-build", action="store_true", help="skip the book build")
    p.set_defaults(func=cmd_study)

    p = sub.add_parser("bench", help="run the benchmarks and write one summary file")
    p.add_argument("--out", default="data/results/benchmarks.json",
                   help="results file; each benchmark's entry is replaced, the others kept")
    p.add_argument("--only", action="append", help="run only these benchmarks (repeatable): capture_throughput, "
                   "memory_scaling, metrics, speculative_decoding, speculative_decoding_bf16, drafter_data_scaling, "
                   "default_profile, llamacpp (needs scripts/setup_llamacpp.sh)")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("dry-run", help="validate a config and estimate memory, disk and time without loading weights")
    _add_common(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_dry_run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ConfigError, ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"wave {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
