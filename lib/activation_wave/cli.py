"""``wave``: one command line, a subcommand per step of the study.

    wave info      [--model M]                       the model, its layers, the EAGLE-3 default
    wave capture   --model M --profile P             prompts -> responses -> hidden-state cache
    wave select    --model M [--k 3] [--method X]    which layers should a drafter read?
    wave train-draft --model M --layers 2,15,27 --out DIR
    wave speculate --model M --draft DIR --prompts FILE
    wave export    --engine llamacpp --draft DIR --out FILE.gguf   (needs scripts/setup_llamacpp.sh)
    wave export    --engine specforge --run-dir D [--layers 2,16,29]  a SpecForge training run (GPU scale)
    wave export    --engine vllm --draft DIR --out FOLDER        the drafter as vLLM's EAGLE-3 loader reads it
    wave serve     --engine vllm --draft DIR [--dry-run]  vLLM's OpenAI server with the drafter (needs scripts/setup_vllm.sh)
    wave generate  --engine llamacpp --split eval --out FILE.jsonl [--check-against FILE]
                                                     target responses from llama-server (same schema)
    wave study     --profile P                       every chapter, then the book
    wave bench     [--profile P] [--only NAME]       benchmarks -> data/results/benchmarks.json
    wave dry-run   --profile paper --model M         estimated memory / disk / time, no weights

Every step takes ``--profile`` and ``--set section.key=value`` overrides; see
``wave <step> --help``. Exit codes: 0 success, 2 bad input (one line on stderr naming
the problem and the fix), 130 interrupted (Ctrl-C; caches written so far are kept), 143
terminated (SIGTERM; child processes are stopped and temporary folders removed).

Files are written through :mod:`activation_wave.core.files`: atomically, and an existing
``--out`` is replaced only when the study wrote it (a responses file, a benchmarks file, a
GGUF) unless ``--force``; ``study --book-dir`` must be new, empty, or a run folder the study made.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from activation_wave.core.config import PROFILES, ConfigError, StudyConfig, load_config, parse_overrides
from activation_wave.core.layers import text_config


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line on stderr (exit 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _config(args: argparse.Namespace, flags: Mapping[str, tuple[str, Any]] | None = None, **extra: Any) -> StudyConfig:
    """The run's config from ``--profile``, ``--model``, ``--set`` and ``extra`` dotted keys.

    ``flags`` maps a dotted key to the (flag, value) that set it, so an out-of-range value
    is reported under the flag the user typed (``--temperature -1``) rather than its key.
    """
    overrides = parse_overrides(getattr(args, "set", None))
    overrides.update({k: v for k, v in extra.items() if v is not None})
    overrides.update({k: v for k, (_, v) in (flags or {}).items() if v is not None})
    try:
        cfg = load_config(args.profile, overrides, model=args.model)
        check_not_a_drafter(cfg.model)
        return cfg
    except ConfigError as exc:
        flag = (flags or {}).get(exc.key or "")
        if flag is None or flag[1] is None or exc.expected is None:
            raise
        raise ConfigError(f"{flag[0]} {flag[1]}: must be {exc.expected} ({exc.key})", key=exc.key,
                          expected=exc.expected) from None


def check_not_a_drafter(model: str) -> None:
    """Refuse a drafter folder given as the target (``--model``): its config.json describes one
    EAGLE-3 head (``LlamaForCausalLMEagle3``, layer ids to read), which every step would
    otherwise take for a target of one block with no tokenizer."""
    from activation_wave.core.layers import TOP_LEVEL_KEY

    cfg_file = Path(model).expanduser() / "config.json"
    try:
        doc = json.loads(cfg_file.read_text(encoding="utf-8")) if cfg_file.is_file() else None
    except (OSError, ValueError):
        return  # the model loader names what is wrong with it
    if isinstance(doc, dict) and ("Eagle3" in str(doc.get("architectures")) or TOP_LEVEL_KEY in doc):
        raise ConfigError(f"--model {model} is a drafter (an EAGLE-3 head: {cfg_file} names "
                          f"{doc.get('architectures') or TOP_LEVEL_KEY}), not a target model: give the target it drafts "
                          f"for with --model (e.g. --model smollm2-135m) and the drafter with --draft {model}",
                          key="model", expected="a target model")


def _add_common(p: argparse.ArgumentParser, *, model_default: str | None = None) -> None:
    p.add_argument("--model", default=model_default,
                   help="alias (smollm2-135m, gemma3-270m, qwen2.5-coder-1.5b), hub id, local folder or .gguf file "
                        "(default: the profile's model)")
    p.add_argument("--profile", default="smoke", choices=PROFILES, help="run profile (default: smoke)")
    p.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE",
                   help="override one config value, e.g. --set capture.batch_size=4 (repeatable)")


def cmd_info(args: argparse.Namespace) -> int:
    from activation_wave.core.layers import eagle3_default_layers, to_convention
    from activation_wave.core.paths import cache_root
    from activation_wave.models.targets import load_target

    from activation_wave.study.estimate import check_before_load

    cfg = _config(args)
    check_before_load(cfg, steps=("load",))  # from config.json alone: a model over the limit is never loaded
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
    from activation_wave.study.steps import run_capture

    cfg = _config(args)
    cap = run_capture(cfg, regenerate=args.regenerate)
    print(f"responses  {cap.responses_path}")
    print(f"capture    {cap.cache.path}")
    print(f"summary    {cap.cache.summary()}")
    return 0


def cmd_select(args: argparse.Namespace) -> int:
    import contextlib

    from activation_wave.study.steps import run_capture
    from activation_wave.select.report import check_request, format_report, select_for_cli

    cfg = _config(args, flags={"select.k": ("--k", args.k), "select.method": ("--method", args.method)})
    check_request(cfg.select.method, cfg.select.k)
    data = sys.stdout
    # with --json stdout carries only the JSON: every message on the way goes to stderr
    with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
        cap = run_capture(cfg, progress=not args.json)
        out = select_for_cli(cap, cfg)
    print(json.dumps(out, indent=1) if args.json else format_report(out), file=data)
    return 0


def _print_engine_warnings(warnings: list[str]) -> None:
    """Say which engines cannot load a drafter on the chosen layers (activation_wave.engines.conventions)."""
    if warnings:
        print("engines that cannot load a drafter on these layers (or would feed it other tensors):")
        for w in warnings:
            print(f"  ! {w}")


def _layers(text: str) -> tuple[int, ...]:
    """``--layers`` as typed (strict: :func:`activation_wave.core.layers.parse_layer_ids`); the range
    check against the model's N follows in ``train-draft``."""
    from activation_wave.core.layers import parse_layer_ids

    try:
        return parse_layer_ids(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


#: What ``train-draft`` writes into its folder; ``--force`` replaces a folder holding only these.
DRAFTER_FILES = {"model.safetensors", "config.json", "provenance.json", "train_log.json"}


def check_out_dir(out: Path, *, force: bool = False) -> Path:
    """Validate ``train-draft --out`` before any work: not a file, not a non-empty folder
    (unless ``force`` and it holds a previous drafter only), and a parent that can be created."""
    if out.is_symlink():  # the final move would replace the link itself, after the training
        raise ValueError(f"--out {out} is a symbolic link (to {os.readlink(out)}); give the folder itself, e.g. --out "
                         f"{out.resolve()}, or a new path")
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is an existing file; give a folder path (it is created), e.g. --out scratch/draft")
    present = {p.name for p in out.iterdir()} if out.is_dir() else set()
    if present and not force:
        raise ValueError(f"--out {out} is a non-empty folder; give a new folder, or add --force to replace the "
                         "drafter in it")
    if present - DRAFTER_FILES:
        raise ValueError(f"--out {out} holds files other than a drafter checkpoint ({sorted(present - DRAFTER_FILES)[:3]}); "
                         "--force only replaces a previous drafter: give a new folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    if not os.access(out.parent, os.W_OK):
        raise PermissionError(13, "folder not writable", str(out.parent))
    return out


def publish_drafter(tmp: Path, out: Path, *, force: bool = False) -> Path:
    """Move a drafter trained into ``tmp`` to ``out``; if that fails, keep ``tmp`` and say where it is."""
    try:
        if out.is_dir() and force:
            for f in out.iterdir():  # only drafter files (check_out_dir)
                f.unlink()
        os.replace(tmp, out)
    except OSError as exc:
        raise RuntimeError(f"could not move the trained drafter to {out} ({exc.strerror or exc}); it is kept in "
                           f"{tmp}: move it yourself, e.g. mv {tmp} <folder>") from None
    return out


def cmd_train_draft(args: argparse.Namespace) -> int:
    from activation_wave.core.layers import check_layers
    from activation_wave.models.targets import n_layers_of
    from activation_wave.study.steps import run_capture
    from activation_wave.draft.training import train_drafter

    cfg = _config(args)
    from activation_wave.study.estimate import check_before_load

    layers = check_layers(args.layers, n_layers_of(cfg.model), what="--layers")  # the one check of these ids
    out = check_out_dir(Path(args.out), force=args.force)
    check_before_load(cfg, layers=len(layers))  # the drafter reads len(--layers) layers, not select.k
    cap = run_capture(cfg)
    # Trained into a temporary sibling first, so a late failure never loses the drafter.
    tmp = out.with_name(f".{out.name}.training-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        train_drafter(cap.target, cap.cache, layers, cfg.draft, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # a failed training leaves nothing behind
        raise
    print(f"drafter    {publish_drafter(tmp, out, force=args.force)}")
    from activation_wave.engines.conventions import engine_report

    config = text_config(cap.target.model.config)
    rep = engine_report(layers, cap.target.n_layers, model_type=str(config.model_type),
                        fused_norm=cfg.draft.fused_norm)
    print(f"engines    loadable by {', '.join(e for e, r in rep.items() if r['ok']) or 'none'}")
    _print_engine_warnings([f"{e}: {p}" for e, r in rep.items() for p in r["problems"]])
    return 0


#: The flags of ``wave export`` that only some engines take (the others refuse them, so a flag
#: is never ignored silently).
EXPORT_FLAGS: dict[str, tuple[str, ...]] = {
    "--draft": ("llamacpp", "vllm"), "--out": ("llamacpp", "vllm"), "--outtype": ("llamacpp",),
    "--run-dir": ("specforge",), "--layers": ("specforge",), "--gpus": ("specforge",),
    "--chat-template": ("specforge",), "--sources": ("specforge",)}


def check_export_flags(args: argparse.Namespace) -> None:
    """Refuse ``wave export`` flags that the chosen ``--engine`` does not take (:data:`EXPORT_FLAGS`)."""
    given = [f for f, engines in EXPORT_FLAGS.items()
             if getattr(args, f[2:].replace("-", "_"), None) is not None and args.engine not in engines]
    if given:
        takes = sorted({f for f, engines in EXPORT_FLAGS.items() if args.engine in engines})
        raise ValueError(f"--engine {args.engine} does not take {', '.join(given)} (it would be ignored); leave "
                         f"{'it' if len(given) == 1 else 'them'} out (--engine {args.engine} takes "
                         f"{', '.join(takes)}, --model and --force)")


def cmd_export(args: argparse.Namespace) -> int:
    if args.engine == "specforge":
        return cmd_export_specforge(args)
    if args.engine == "vllm":
        return cmd_export_vllm(args)
    from activation_wave.engines.llamacpp import check_export_out, export_llamacpp
    from activation_wave.study.steps import get_target

    from activation_wave.study.estimate import check_before_load

    check_export_flags(args)
    missing = [f for f, v in (("--draft", args.draft), ("--out", args.out)) if not v]
    if missing:
        raise ValueError(f"--engine {args.engine} needs {' and '.join(missing)}: the drafter folder and the file to "
                         "write, e.g. --draft scratch/draft --out scratch/draft.gguf")
    cfg = _config(args)
    check_export_out(Path(args.out), force=args.force)  # before the target is loaded
    check_before_load(cfg, steps=("load",))
    target = get_target(cfg)
    outtype = args.outtype or "f16"
    out = export_llamacpp(args.draft, args.out, target, outtype=outtype, force=args.force)
    print(f"gguf       {out}  ({out.stat().st_size / 2**20:.1f} MiB, {outtype})")
    print(f"serve      llama-server -m <target .gguf> -md {out} --spec-type draft-eagle3")
    return 0


def cmd_export_vllm(args: argparse.Namespace) -> int:
    """``wave export --engine vllm --draft D --out O``: the drafter folder vLLM 0.32 loads (no
    target needed: vLLM shares the target's embeddings; ``--model``, when given, supplies the
    target's N that a SpecForge checkpoint may not record)."""
    import shlex

    from activation_wave.engines.vllm import check_export_dir, export_vllm

    check_export_flags(args)
    missing = [f for f, v in (("--draft", args.draft), ("--out", args.out)) if not v]
    if missing:
        raise ValueError(f"--engine vllm needs {' and '.join(missing)}: the drafter folder and the folder to write, "
                         "e.g. --draft scratch/draft --out scratch/draft-vllm")
    check_export_dir(args.out, force=args.force, draft=args.draft)  # before anything is read
    n_layers = None
    if args.model:
        from activation_wave.models.targets import n_layers_of

        n_layers = n_layers_of(_config(args).model)
    out = export_vllm(args.draft, args.out, force=args.force, n_layers=n_layers)
    cfg = json.loads((out / "config.json").read_text())
    print(f"vllm       {out}  (layers {cfg['eagle_aux_hidden_state_layer_ids']}, draft vocab {cfg['draft_vocab_size']})")
    print(f"serve      wave serve --engine vllm --draft {shlex.quote(str(Path(args.draft).resolve()))}  (writes the "
          "target's folder; --dry-run prints the plain vLLM command with absolute paths)")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """``wave serve --engine vllm --draft D``: the target folder and the export written or reused,
    then vLLM's OpenAI-compatible server in a process group that stops with this command
    (activation_wave.engines.vllm_serve); ``--dry-run`` prints the plain vLLM command instead."""
    import time

    from activation_wave.core.paths import cache_root
    from activation_wave.engines import vllm as V
    from activation_wave.engines import vllm_serve as S
    from activation_wave.study.estimate import check_before_load
    from activation_wave.study.steps import get_target

    cfg = _config(args)
    v = V.Vllm(Path(os.environ.get("VLLM_DIR") or V.REPO_ROOT / "build" / "vllm")) if args.dry_run else V.find_vllm()

    def load(name: str) -> Any:
        named = cfg if name == cfg.model else load_config(args.profile, parse_overrides(args.set), model=name)
        check_before_load(named, steps=("load",))
        return get_target(named)

    prep = S.prepare(args.draft, model=args.model, default_model=cfg.model, load_target=load, out=args.out)
    server = S.Server(prep.target_dir, prep.draft_dir, depth=args.depth, threads=args.threads, host=args.host,
                      port=args.port, name=prep.name, max_model_len=args.max_model_len, kv_cache_mib=args.kv_cache_mib)
    for line in prep.notes:
        print(line, flush=True)
    if args.dry_run:
        print(f"command    {server.command(v)}")
        if not v.python.exists():
            print(f"           (vLLM is not installed at {v.root} yet: {V.SETUP_COMMAND})")
        print(f"try        {server.example_request()}  (once the server answers)")
        return 0
    log = Path(args.log) if args.log else cache_root() / "vllm" / "logs" / f"serve-{args.port}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    return S.serve(server, v, log, start_timeout=args.start_timeout)


def cmd_export_specforge(args: argparse.Namespace) -> int:
    """``wave export --engine specforge --run-dir D``: a SpecForge 0.2.0 training run for the
    model and the layers ``wave select`` recommends (or ``--layers``); activation_wave.engines.specforge."""
    import shlex

    from activation_wave.core.layers import check_layers
    from activation_wave.engines import specforge as sf

    if not args.run_dir:
        raise ValueError("--engine specforge needs --run-dir: a new folder for the training run, e.g. "
                         "--run-dir runs/specforge")
    if args.draft or args.out:
        raise ValueError("--engine specforge writes a training run, not a drafter file: give --run-dir D, not "
                         "--draft/--out")
    check_export_flags(args)
    cfg = _config(args)
    run_dir = sf.check_run_dir(Path(args.run_dir), force=args.force, create=False)  # before any work
    sources = tuple(s.strip() for s in (args.sources if args.sources is not None else ",".join(sf.STUDY_SOURCES))
                    .split(",") if s.strip())
    gpus = args.gpus if args.gpus is not None else sf.DEFAULT_GPUS
    command = "wave " + shlex.join(getattr(args, "argv", None) or [])
    sf.check_args(model=cfg.model, gpus=gpus, chat_template=args.chat_template, sources=sources, command=command)
    target = sf.target_config(cfg.model)
    n = int(target[0]["num_hidden_layers"])
    if args.layers is not None:
        layers, basis = list(check_layers(args.layers, n, what="--layers")), "given (--layers)"
    else:
        from activation_wave.core.layers import eagle3_default_layers
        from activation_wave.select.report import select_for_cli
        from activation_wave.study.steps import run_capture

        try:
            sel = select_for_cli(run_capture(cfg), cfg)
        except ConfigError as exc:  # the capture this model needs does not fit here: --layers needs none
            if not str(exc.expected or "").endswith("GiB"):
                raise
            example = ",".join(map(str, eagle3_default_layers(n)))
            raise ConfigError(f"{exc}; or give the layers yourself with --layers, e.g. --layers {example} (the "
                              f"EAGLE-3 default for N = {n}): the export then needs neither the capture nor `wave "
                              "select`", key=exc.key, expected=exc.expected) from None
        layers = list(sel["exports_ids"])
        basis = (f"wave select: recommended ({sel['basis']})" if sel["exports_for"] == "recommended" else
                 f"wave select: {cfg.select.method}'s candidate (nothing recommended: {sel['reason']})")
    man = sf.export_specforge(cfg, run_dir, layers=layers, basis=basis, gpus=gpus, sources=sources,
                              chat_template=args.chat_template, force=args.force, target=target, command=command,
                              given=set(parse_overrides(args.set)))
    print(f"run        {run_dir}  (SpecForge {sf.SPECFORGE_VERSION}; target {man['target']['target_model_path']}, "
          f"N = {n}; {man['data']['records']} train prompts)")
    print(f"layers     hidden_states {man['layers']['hidden_states']} = SpecForge ids {man['layers']['specforge']}  "
          f"({basis})")
    print(f"train      {' '.join(man['run']['train'])}")
    print(f"check      {sf.check_text(man['check'])}")
    print(f"code       {sf.CODEBASE}")
    for r in man["settings"]["fixed"]:
        if r["differs"]:
            print(f"  ! {r['study']} = {r['value']} is not carried: {r['why']}")
    for r in man["settings"]["not_carried"]:
        print(f"  ! {r['study']} = {r['profile']} (the profile's) is not carried: SpecForge's {r['used']}; {r['why']}")
    for r in man["settings"]["differences"]:
        recipe = f", its recipe {r['specforge_recipe']}" if "specforge_recipe" in r else ""
        print(f"differs    {r['setting']} = {r['run']} (SpecForge's default {r['specforge_default']}{recipe}): {r['why']}")
    print(f"next       bash {run_dir}/launch.sh on a machine with {gpus} GPUs; then "
          f"wave speculate --model {cfg.model} --draft {run_dir} --prompts <file>")
    return 0


def check_responses_out(out: Path, *, against: Path | None = None, inputs: tuple[Path, ...] = (),
                        force: bool = False) -> Path:
    """``generate --out``: a .jsonl file path in an existing folder, not the reference it is
    checked against nor one of the prompt files it reads (``inputs``; not even with ``force``),
    and, if it exists, a responses file the study wrote (its header line) unless ``force``."""
    from activation_wave.core.files import check_replace
    from activation_wave.models.prompts import responses_owned

    if out.is_dir() or out.suffix != ".jsonl":
        raise ValueError(f"--out {out}: give a .jsonl file path, e.g. --out scratch/llamacpp-eval.jsonl")
    if not out.parent.is_dir():
        raise ValueError(f"--out {out}: the folder {out.parent} does not exist; create it (mkdir -p {out.parent})")
    if against is not None and out.resolve() == against.resolve():
        raise ValueError(f"--out {out} is the --check-against file; write the new responses elsewhere")
    if any(out.resolve() == p.resolve() for p in inputs):
        raise ValueError(f"--out {out} is a prompt file this command reads (data.sources); write the responses "
                         "elsewhere, e.g. --out scratch/llamacpp-eval.jsonl")
    return check_replace(out, responses_owned, force=force, flag="--out")


def read_reference(against: Path) -> dict[str, Any]:
    """``generate --check-against``: the reference responses, read and checked before anything
    is generated (a missing, empty or non-responses file fails in one line naming it)."""
    from activation_wave.models.prompts import read_responses

    if not against.is_file():
        raise FileNotFoundError(f"--check-against {against}: no such responses file (the committed ones are in "
                                "data/responses/)")
    try:
        ref = read_responses(against)
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise ValueError(f"--check-against {against} is not a responses .jsonl ({type(exc).__name__}: "
                         f"{str(exc)[:80]}); give one written by `wave capture` or `wave generate`, e.g. one in "
                         "data/responses/") from None
    if not ref:
        raise ValueError(f"--check-against {against} holds no responses; give a responses .jsonl with records, e.g. "
                         "one in data/responses/")
    return ref


def _flag_value(flag: str, text: str | None, typ: type, bound: Any) -> Any:
    """A numeric flag parsed by the config's strict parser and checked against ``bound``
    (``--temperature nan`` and ``--seed -1`` are refused as ``--set`` would refuse them)."""
    from activation_wave.core.config import parse_value

    if text is None:
        return None
    value = parse_value(text, typ, flag)
    if not bound.contains(value):
        raise ConfigError(f"{flag} {text}: must be {bound}", key=flag, expected=str(bound))
    return value


def cmd_generate(args: argparse.Namespace) -> int:
    import datetime
    import shlex
    import tempfile

    from activation_wave.engines.llamacpp_generate import (generate_with_llamacpp, gguf_of_model, gguf_tokenizer,
                                                           greedy_agreement)
    from activation_wave.core.config import SEED, TEMPERATURE
    from activation_wave.models.prompts import load_prompts, read_header, responses_owned, write_responses

    cfg = _config(args, flags={"data.max_new_tokens": ("--max-new-tokens", args.max_new_tokens)})
    args.temperature = _flag_value("--temperature", args.temperature, float, TEMPERATURE) or 0.0
    args.seed = _flag_value("--seed", args.seed, int, SEED)
    against = Path(args.check_against) if args.check_against else None
    inputs = tuple(Path(s) for s in cfg.data.sources if s.endswith(".jsonl"))
    out = check_responses_out(Path(args.out), against=against, inputs=inputs, force=args.force)
    if against is not None and args.temperature > 0:
        raise ValueError(f"--check-against compares greedy responses; --temperature {args.temperature} samples "
                         "(llama.cpp and torch draw different random numbers), use --temperature 0")
    ref = read_reference(against) if against is not None else None  # checked before anything is generated
    if args.slots < 1 or args.threads < 1:
        raise ValueError(f"--slots {args.slots} --threads {args.threads}: slots and threads must be >= 1")
    gguf = gguf_of_model(cfg.model)
    prompts = [p for p in load_prompts(cfg.data) if args.split == "all" or p.split == args.split]
    if not prompts:
        raise ValueError(f"no {args.split}-split prompts in the {cfg.profile} profile's data sources")
    with tempfile.TemporaryDirectory(prefix="wave-generate-") as work:
        records, run, header = generate_with_llamacpp(
            gguf, prompts, gguf_tokenizer(gguf), cfg.data.max_new_tokens, slots=args.slots, threads=args.threads,
            temperature=args.temperature, seed=args.seed if args.seed is not None else cfg.data.seed,
            workdir=Path(work), progress=not args.json)
    header["command"] = "wave " + shlex.join(getattr(args, "argv", None) or [])
    header["date"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    write_responses(out, records, header, owned=responses_owned, force=args.force)
    doc: dict[str, Any] = {"out": str(out), "engine": run.engine, "model": cfg.model, "profile": cfg.profile,
                           "split": args.split, "max_new_tokens": cfg.data.max_new_tokens,
                           "temperature": args.temperature, "speed": run.speed(),
                           "command": header["command"], "date": header["date"]}
    if against is not None and ref is not None:
        agreement = greedy_agreement(ref, records)
        doc["reference"] = {"file": str(against), "model": read_header(against).get("model"),
                            "engine": next(iter(ref.values())).engine if ref else None}
        doc["agreement"] = agreement.to_json()
        if agreement.missing:
            print(f"[generate] {len(agreement.missing)} prompts have no response in {against} (first: "
                  f"{agreement.missing[0]!r}); was it made with another profile than {cfg.profile!r}?", file=sys.stderr)
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    sp = doc["speed"]
    print(f"responses  {out}  ({sp['responses']} prompts, {sp['new_tokens']} new tokens)")
    print(f"engine     {run.engine}")
    print(f"speed      {sp['tokens_per_s']} tokens/s over {sp['wall_s']} s wall ({args.slots} slots; "
          f"{sp['per_sequence_tokens_per_s']} tokens/s per sequence)")
    if against is not None:
        a = doc["agreement"]
        print(f"agreement  {a['identical']}/{a['compared']} identical to {against.name}; mean matching prefix "
              f"{a['mean_prefix_share']}; median first difference at token {a['median_first_diff']}"
              + (f"; {len(a['prompt_differs'])} prompts tokenized differently" if a["prompt_differs"] else ""))
    return 0


def _fmt(x: float | None, spec: str) -> str:
    """A number for the text report; ``-`` where it is undefined (JSON null)."""
    return "-" if x is None else format(x, spec)


def speculation_text(doc: Mapping[str, Any]) -> str:
    """The text report of ``wave speculate``: one summary line, then one line per prompt.

    Undefined numbers (a draft position never reached, tau without a verify round) print as ``-``.

    >>> print(speculation_text({"method": "eagle3-chain", "n_prompts": 1, "new_tokens": 1, "tau": None,
    ...     "tokens_per_s": 2.0, "acceptance_by_position": [0.5, None], "results": [{"id": "a", "token_ids": [7]}]}))
    eagle3-chain  prompts 1  new tokens 1  tau -  tokens/s 2.0  acceptance by position 0.50 -
      a: 1 tokens
    """
    head = (f"{doc['method']}  prompts {doc['n_prompts']}  new tokens {doc['new_tokens']}  tau {_fmt(doc['tau'], '.3f')}  "
            f"tokens/s {_fmt(doc['tokens_per_s'], '.1f')}  acceptance by position "
            + " ".join(_fmt(a, ".2f") for a in doc["acceptance_by_position"]))
    return "\n".join([head] + [f"  {r['id']}: {len(r['token_ids'])} tokens" for r in doc["results"]])


def cmd_speculate(args: argparse.Namespace) -> int:
    from activation_wave.models.prompts import chat_ids, check_context, read_prompt_jsonl
    from activation_wave.models.drafter import load_drafter
    from activation_wave.study.steps import get_target
    from activation_wave.decode.speculative import speculate

    cfg = _config(args, flags={"spec.temperature": ("--temperature", args.temperature),
                               "spec.max_new_tokens": ("--max-new-tokens", args.max_new_tokens)})
    tree = args.method == "tree"
    if tree and cfg.spec.tree_topk < 1:
        raise ConfigError(f"--method tree needs spec.tree_topk >= 1 (this profile has {cfg.spec.tree_topk}); "
                          "add --set spec.tree_topk=2 or use --method chain")
    every = read_prompt_jsonl(args.prompts)
    prompts = every[: cfg.spec.max_prompts]
    load_drafter(args.draft)  # a broken checkpoint fails here, before the target is loaded
    from activation_wave.study.estimate import check_before_load, check_fit, model_shape, shape_of

    # speculate loads the target and a drafter, nothing else: only that step's memory is checked
    # (the capture's and the training's would name keys this command does not use)
    check_before_load(cfg, steps=("load",))  # from config.json alone, before the weights
    try:
        shape = model_shape(cfg.model)
    except (ValueError, KeyError, TypeError, OSError):
        shape = None  # known once loaded (checked below)
    if shape is not None:
        check_fit(cfg, shape, memory=False)  # the values this model does not allow, before it loads
    target = get_target(cfg)
    check_fit(cfg, shape_of(target.model.config), memory=False)
    drafter = load_drafter(args.draft, target)
    if len(every) > len(prompts):
        print(f"[speculate] decoding the first {len(prompts)} of {len(every)} prompts (spec.max_prompts of the "
              f"{cfg.profile} profile; --set spec.max_prompts={len(every)} for all)", file=sys.stderr)
    ids = [chat_ids(target, p.text) for p in prompts]
    check_context(target, ids, [p.id for p in prompts], cfg.spec.max_new_tokens, what=f"prompts in {args.prompts}",
                  fix="--max-new-tokens")  # refuses prompts that do not fit, before any decoding
    res = speculate(target, drafter, ids, cfg.spec, ids=[p.id for p in prompts], tree=tree)
    doc = res.to_json()
    doc["results"] = [{"id": p["id"], "token_ids": p["token_ids"]} for p in doc["per_prompt"]]
    print(json.dumps(doc) if args.json else speculation_text(doc))
    return 0


def cmd_study(args: argparse.Namespace) -> int:
    from activation_wave.study.runner import run_study

    return run_study(profile=args.profile, model=args.model, book_dir=args.book_dir, only=args.only,
                     build=not args.no_build, overrides=parse_overrides(args.set))


def check_results_file(path: Path, *, flag: str = "--out") -> Path:
    """A results file that a step merges its entries into: absent, or a JSON object. Checked
    before any work, so a wrong path fails in one line naming it instead of after the run."""
    if path.is_dir():
        raise ValueError(f"{flag} {path} is a folder; give a .json file path, e.g. {flag} data/results/benchmarks.json")
    if not path.exists():
        if not path.parent.is_dir():
            raise ValueError(f"{flag} {path}: the folder {path.parent} does not exist; create it (mkdir -p "
                             f"{path.parent}) or give another path")
        return path
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{flag} {path} is not valid JSON ({exc}); its entries are merged into it, so give a "
                         "results file written by `wave bench`, or a new path") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{flag} {path} holds a JSON {type(doc).__name__}, not an object of benchmark entries; give "
                         "a results file written by `wave bench`, or a new path")
    from activation_wave.core.results import benchmarks_owned

    why = benchmarks_owned(path)
    if why is not None:
        raise ValueError(f"{flag} {path} is a JSON object but {why}: not one written by `wave bench`, so it is not "
                         "replaced; give a new path or an existing benchmarks file")
    return path


def cmd_bench(args: argparse.Namespace) -> int:
    from activation_wave.benchmarks import run_benchmarks
    from activation_wave.benchmarks.suite import estimates

    cfg = _config(args)
    if args.estimate:  # from the recorded runs: nothing is run
        print("\n".join(estimates(cfg, Path(args.out), args.only)))
        return 0
    run_benchmarks(cfg, out=check_results_file(Path(args.out)), only=args.only)
    return 0


def cmd_findings(args: argparse.Namespace) -> int:
    """Every registered test's record from the profile's results files (written to its findings.json)."""
    from activation_wave.core.paths import REPO_ROOT
    from activation_wave.core.results import to_jsonable
    from activation_wave.study import findings

    cfg = _config(args)
    f = findings.record(cfg)
    if args.readme:
        readme = REPO_ROOT / "README.md"
        print(f"{readme.name}: {'updated' if findings.fill_readme(readme, f) else 'already up to date'}",
              file=sys.stderr)
    if args.json:
        print(json.dumps({"tally": f.tally(), "records": [to_jsonable(r) for r in f.records]}, indent=1))
    elif not args.readme:
        print(findings.table(f).to_string(index=False))
        print("\n" + ", ".join(f"{n} {w}" for w, n in f.tally().items()) + f" ({findings.path(cfg).name})")
    return 0


def cmd_dry_run(args: argparse.Namespace) -> int:
    from activation_wave.study.estimate import dry_run

    cfg = _config(args)
    print(json.dumps(dry_run(cfg), indent=1) if args.json else dry_run(cfg, text=True))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="wave", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    p.add_argument("--method", default=None, help="selection method (default: profile's; see the book's layer-selection page)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_select)

    p = sub.add_parser("train-draft", help="train an EAGLE-3-style draft head on given layers")
    _add_common(p)
    p.add_argument("--layers", type=_layers, required=True, help="hidden_states indices, e.g. 2,15,27")
    p.add_argument("--out", required=True, help="output folder for the checkpoint (new or empty; checked before "
                   "the capture and training)")
    p.add_argument("--force", action="store_true", help="replace the contents of a non-empty --out folder")
    p.set_defaults(func=cmd_train_draft)

    p = sub.add_parser("speculate", help="lossless speculative decoding with a trained drafter")
    _add_common(p)
    p.add_argument("--draft", required=True, help="drafter folder written by train-draft")
    p.add_argument("--prompts", required=True, help="JSONL file, one {\"prompt\": ...} per line")
    # parsed by the config's strict parser (as --set spec.temperature=...), not by float() / int()
    p.add_argument("--temperature", default=None, help="0 = greedy, at most 10 (default: the profile's spec.temperature)")
    p.add_argument("--max-new-tokens", default=None, help=">= 1 (default: the profile's spec.max_new_tokens)")
    p.add_argument("--method", choices=("chain", "tree"), default="chain",
                   help="chain (default: one draft per position; the decoding benchmark in "
                        "data/results/benchmarks.json measures it faster than the tree on a CPU) or tree (an "
                        "EAGLE-2-style dynamic tree of spec.tree_size tokens, top spec.tree_topk per level; "
                        "the drafters page measures both)")
    p.add_argument("--json", action="store_true", help="print one JSON object: summary fields, `results` = "
                   "[{id, token_ids}] per prompt, and `per_prompt` with timings")
    p.set_defaults(func=cmd_speculate)

    p = sub.add_parser("export", help="convert a drafter for a serving engine (llama.cpp: a .gguf), or hand the "
                       "chosen layers to SpecForge (a training run)")
    _add_common(p)
    p.add_argument("--engine", required=True, choices=["llamacpp", "specforge", "vllm"], help="engine to export for")
    p.add_argument("--draft", help="drafter folder written by train-draft (llamacpp, vllm)")
    p.add_argument("--out", help="output .gguf file in an existing folder (llamacpp; replaced only when the "
                   "conversion succeeds); vllm: a folder (new, empty, or an earlier vLLM export)")
    p.add_argument("--run-dir", help="specforge: the folder of the training run to write (new, empty, or one this "
                   "command wrote)")
    p.add_argument("--layers", type=_layers, default=None, help="specforge: hidden_states indices the drafter reads, "
                   "e.g. 2,16,29 (default: the set `wave select` recommends on the model's capture)")
    p.add_argument("--gpus", type=int, default=None, help="specforge: GPUs of the training machine, 1..64 (default 8)")
    p.add_argument("--chat-template", default=None, help="specforge: SpecForge's chat template name (default: from "
                   "the model; llama3 for Llama 3)")
    p.add_argument("--sources", default=None, help="specforge: prompt sets whose train split "
                   "becomes the training prompts (default: team,humaneval,corpus)")
    p.add_argument("--outtype", default=None, choices=["f32", "f16", "bf16", "q8_0"],
                   help="drafter weight type in the .gguf (default: f16)")
    p.add_argument("--force", action="store_true", help="replace an existing --out that is not a GGUF file; "
                   "specforge: rewrite a run folder SpecForge has written into (its outputs are kept)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("serve", help="serve a drafter with the target in vLLM's OpenAI-compatible server (one "
                       "command: target folder, export, server, counters on exit)")
    _add_common(p)
    p.add_argument("--engine", required=True, choices=["vllm"], help="vllm: vLLM 0.32 on the CPU (needs "
                   "scripts/setup_vllm.sh)")
    p.add_argument("--draft", default=None, help="drafter folder written by train-draft (its target is the one in its "
                   "provenance.json unless --model); without it, plain decoding")
    p.add_argument("--out", default=None, help="folder of the drafter's vLLM export (default: in the cache, keyed by "
                   "its weights; reused while they are the drafter's)")
    p.add_argument("--depth", type=int, default=3, help="draft tokens per round, vLLM's num_speculative_tokens "
                   "(default 3)")
    p.add_argument("--threads", type=int, default=2, help="CPU threads of the server (default 2)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    p.add_argument("--max-model-len", type=int, default=2048, help="longest prompt + answer in tokens (default 2048)")
    p.add_argument("--kv-cache-mib", type=int, default=256, help="KV cache memory in MiB (default 256)")
    p.add_argument("--start-timeout", type=float, default=1800.0, help="seconds to wait for the server to answer "
                   "(default 1800; it took about 5 minutes on 2 busy cores)")
    p.add_argument("--log", default=None, help="vLLM's log file (default: <cache>/vllm/logs/serve-<port>-<time>.log)")
    p.add_argument("--dry-run", action="store_true", help="write (or reuse) the target folder and the export, print "
                   "the plain vLLM command with absolute paths, and start nothing")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("generate", help="the target's responses from another engine (llama.cpp's llama-server), "
                       "optionally checked token by token against the PyTorch target's")
    _add_common(p)
    p.add_argument("--engine", required=True, choices=["llamacpp"],
                   help="llamacpp: llama-server on the model's .gguf (needs scripts/setup_llamacpp.sh)")
    p.add_argument("--split", choices=("train", "eval", "all"), default="all",
                   help="which of the profile's prompts (default: all)")
    p.add_argument("--out", required=True, help="responses .jsonl to write (the schema of data/responses/, each "
                   "record naming its engine)")
    p.add_argument("--slots", type=int, default=1, help="parallel sequences, batched continuously (-np; default 1)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads of the server (default 1)")
    # parsed by the config's strict parser (as --set values), not by float() / int()
    p.add_argument("--temperature", default=None,
                   help="0 = greedy (default), at most 10; > 0 samples with no top-k/top-p cut, as the PyTorch path does")
    p.add_argument("--seed", default=None, help="sampling seed of the first prompt, +1 per prompt, in [0, 2^32-1] "
                   "(default: the profile's data.seed)")
    p.add_argument("--force", action="store_true", help="replace an existing --out that is not a responses file "
                   "(never a prompt file the command reads)")
    p.add_argument("--max-new-tokens", default=None, help=">= 1 (default: the profile's data.max_new_tokens)")
    p.add_argument("--check-against", default=None, metavar="FILE",
                   help="a greedy responses .jsonl (e.g. the committed PyTorch one in data/responses/): report per "
                        "prompt whether the new response is identical or where it first differs")
    p.add_argument("--json", action="store_true", help="print one JSON object (speed, engine, agreement with "
                   "per-prompt rows)")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("study", help="run every chapter notebook (papermill) and build the book")
    _add_common(p)
    p.add_argument("--book-dir", default=None, help="where executed chapters and the book go "
                   "(default: book/ for the default profile, scratch/<profile>/book otherwise)")
    p.add_argument("--only", action="append", help="run only these notebooks (name prefix, repeatable)")
    p.add_argument("--no-build", action="store_true", help="skip the book build")
    p.set_defaults(func=cmd_study)

    p = sub.add_parser("bench", help="run the benchmarks and write one summary file")
    _add_common(p)
    p.set_defaults(profile="default")  # the benchmarks file describes the default profile
    p.add_argument("--out", default="data/results/benchmarks.json",
                   help="results file; each benchmark's entry is replaced, the others kept")
    p.add_argument("--only", action="append", help="run only these benchmarks (repeatable): capture_throughput, "
                   "memory_scaling, metrics, speculative_decoding, speculative_decoding_bf16, "
                   "training_precision (bf16 vs fp32 drafter training on this CPU), drafter_data_scaling, default_profile, llamacpp (needs scripts/setup_llamacpp.sh), recipe (the drafter recipe study: "
                   "hours of drafter training, resumable, so it runs only when named; also writes "
                   "data/results/<profile>/<model>/recipe.json), llamacpp_1.5b (the cost page: the third architecture's "
                   "1.5B target and the study's model in llama.cpp, plain / EAGLE-3 / n-gram at 1 and 2 threads; "
                   "about 30 minutes, runs only when named; WAVE_LLAMACPP_SMALL_DRAFTER names the 135M drafter), data_scale (issue 41: drafters on thousands of distinct "
                   "prompts; resumable, runs only when named; also writes data/results/<profile>/<model>/data_scale.json), "
                   "llamacpp_ceiling (issue 42: an EAGLE-3 round in llama.cpp term by term, verify cost by batch size, "
                   "extraction, drafter calls f16/q8_0, predicted vs measured rounds and the ceiling per depth, both "
                   "targets at 1 and 2 threads; about 30 minutes on 2 quiet cores, runs only when named; size: "
                   "python -m activation_wave.benchmarks.llamacpp_ceiling --prompts N --max-new-tokens T), "
                   "large_drafter (issue 42: the 1.5B default triple's drafter on 1,024 distinct prompts answered by "
                   "llama.cpp; responses, capture and training take hours, resumable, runs only when named; "
                   "llamacpp_1.5b then measures it beside the toy drafter), large_drafter_indist (its stage 1's "
                   "recipe on the 128 base train records alone, against stage 1; about 40 minutes, runs only when named), "
                   "large_drafter_indist_all (the same on all 324 train prompts of the sources, the 196 added ones "
                   "answered by llama.cpp, against large_drafter_indist's drafter; about an hour, runs only when named), "
                   "large_drafter_indist_cont (issue 42, eleventh amendment: that drafter trained on for 1,000,000 more "
                   "tokens from its weights, against it; about 40 minutes, runs only when named), "
                   "large_drafter_indist_samples (issue 42, twelfth amendment: the 128 base train records and 2 sampled "
                   "answers of the target to each of their prompts, answered by llama.cpp, against "
                   "large_drafter_indist's drafter; about 75 minutes, runs only when named), "
                   "large_drafter_indist_steps (issue 42, thirteenth amendment: large_drafter_indist_samples's "
                   "drafter with batches of 256 tokens, several times the optimiser steps, against "
                   "large_drafter_indist's drafter; about 55 minutes, runs only when named), "
                   "c2_layer_test (issue 65, fourteenth amendment: the layer test C2 on the 1.5B target with drafters "
                   "of large_drafter_indist's design, the default and the combined rule's set, three seeds each; "
                   "about 3.5 hours, one drafter at a time, resumable, runs only when named), "
                   "vllm (issue 57: plain vLLM 0.32 on the CPU against the study's EAGLE-3 drafters at depths 1-3, "
                   "one rule's set, n-gram speculation and the every-draft-accepted ceiling, at 1 and 2 threads; "
                   "needs scripts/setup_vllm.sh; runs only when named; --estimate says how long it takes here), "
                   "vllm_1.5b (issue 64: the same on the 1.5B target in fp32 with c2_layer_test's default-triple "
                   "drafter, one speculative engine at a time beside plain, the llamacpp_1.5b entry's prompts; needs "
                   "scripts/setup_vllm.sh; about 2 hours, runs only when named)")
    p.add_argument("--estimate", action="store_true", help="print how long each benchmark should take on this machine "
                   "(its recorded run in --out, plus the drafters and capture it would train first when they are not "
                   "in the cache) and exit; every run prints its line before it starts")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("findings", help="every registered test's number, interval, n and verdict (one record "
                       "each; the book, the README and `wave select` quote these)")
    _add_common(p)
    p.add_argument("--json", action="store_true", help="print the records as JSON")
    p.add_argument("--readme", action="store_true", help="fill the README's findings block from the records")
    p.set_defaults(func=cmd_findings)

    p = sub.add_parser("dry-run", help="validate a config and estimate memory, disk and time without loading weights")
    _add_common(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_dry_run)
    return parser


def error_message(exc: BaseException) -> tuple[str, int] | None:
    """(one-line message, exit code) for an error a user can fix; ``None`` for a bug,
    which keeps its traceback.

    Where a library's error about the user's input crosses into the CLI it is named as such:
    a model config transformers' validation refuses, a safetensors file it cannot read or write.
    A write that failed inside the cache names ``WAVE_CACHE``, as every cache error does.
    """
    from activation_wave.core.files import WriteFailed
    from activation_wave.models.targets import cache_error_message

    if isinstance(exc, WriteFailed) and exc.cause is not None:
        text = cache_error_message(exc.cause)
        if text:
            return f"{text} ({exc.kept})" if exc.kept else text, 2
    library = _library_error(exc)
    if library is not None:
        return library, 2
    if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError):
        text = cache_error_message(exc) or (f"{exc.strerror or exc}: {exc.filename}; check that the path exists "
                                            "and is writable" if exc.filename else None)
        return (text, 2) if text else None
    if isinstance(exc, (ConfigError, ValueError, FileNotFoundError, RuntimeError)):
        return str(exc), int(getattr(exc, "exit_code", 2))
    return None


def _library_error(exc: BaseException) -> str | None:
    """One line for the errors libraries raise about a user's files under their own types (not
    ``ValueError`` / ``OSError``): huggingface_hub's strict config validation (a config.json that
    transformers refuses), safetensors' errors (a weights file cut short or not one)."""
    kind = f"{type(exc).__module__}.{type(exc).__name__}"
    detail = _one_line(str(exc))[:300]
    if kind.startswith("huggingface_hub.errors.StrictDataclass"):
        return (f"transformers refuses the model's config.json ({detail}); fix that field in config.json or save the "
                "model again with model.save_pretrained(folder)")
    if type(exc).__name__ == "SafetensorError":
        return (f"a safetensors weights file cannot be read or written ({detail}): if it was being read, it is "
                "truncated or corrupted (copy or save it again); if written, check the disk's space and permissions")
    return None


def _one_line(text: str) -> str:
    return re.sub(r"\s*\n\s*", " ", text.strip())


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is, so that every ``finally`` runs: child processes
    (llama-server, the converter, pool workers) are stopped and temporary folders removed."""


def _on_sigterm(signum: int, frame: Any) -> NoReturn:
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    """Run one ``wave`` step; returns the exit code (0 ok, 2 bad input, 130 interrupted, 143 terminated)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return _main(argv)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return _main(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # as typed, for provenance
    if not sys.stderr.isatty():  # in a log, tqdm redraws are noise: our steps print plain progress lines
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt as exc:
        how = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        print(f"wave {args.command}: {how}; everything cached so far is kept and a rerun resumes from it",
              file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    except Exception as exc:
        found = error_message(exc)
        if found is None:
            raise
        print(f"wave {args.command}: error: {_one_line(found[0])}", file=sys.stderr)
        return found[1]


if __name__ == "__main__":
    sys.exit(main())
