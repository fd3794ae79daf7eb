"""Test-only model builders shared by several test files."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from activation_wave.models.targets import Target


def permutation_target(tokenizer, vocab: int = 128, scale: float = 3.0, seed: int = 0, n_layers: int = 4) -> Target:
    """A tiny Llama whose greedy next token is mostly ``perm[current token]``.

    Its lm_head rows are the (normalised) embedding rows, permuted: the residual stream
    is dominated by the current token's embedding, so the argmax is that token's image
    under a fixed permutation, perturbed by the random blocks. Its greedy responses are
    varied yet learnable, unlike a random model's (which repeats one token).
    """
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=n_layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        emb = model.model.embed_tokens.weight
        perm = torch.randperm(vocab, generator=torch.Generator().manual_seed(seed + 3))
        head = torch.empty_like(emb)
        head[perm] = emb / emb.norm(dim=1, keepdim=True) * scale
        model.lm_head.weight.copy_(head)
    model.generation_config.eos_token_id = getattr(tokenizer, "eos_token_id", None)
    return Target(name="perm-llama", model=model, tokenizer=tokenizer,
                  provenance={"source": "test", "name": "perm-llama", "seed": seed, "vocab": vocab})


#: Eight short prompts for captures of tiny models.
PROMPTS_8 = [("q%d" % i, f"Tell me about {i}, then {i + 1}." * (1 + i % 2)) for i in range(8)]


def captured(target: Target, tmp_path, name: str):
    """Greedy responses of ``target`` to :data:`PROMPTS_8` and their capture, as a
    :class:`~activation_wave.study.steps.Captured` with a small smoke config."""
    from activation_wave.models.capture import capture
    from activation_wave.core.config import CaptureConfig, DataConfig, load_config
    from activation_wave.models.prompts import Prompt, generate_responses
    from activation_wave.study.steps import Captured

    prompts = [Prompt(id=i, text=t, category="c", split="train") for i, t in PROMPTS_8]
    rs, rpath = generate_responses(target, prompts, DataConfig(max_new_tokens=16, batch_size=8), progress=False)
    cache = capture(target, rs, CaptureConfig(batch_size=8, records_per_shard=4, topk=4), out_dir=tmp_path / name,
                    progress=False)
    cfg = load_config("smoke", {"metrics.token_budget": 96, "select.n_random": 2, "select.n_bootstrap": 3}, model=name)
    return Captured(cfg=cfg, target=target, responses=rs, cache=cache, responses_path=rpath)


def greedy_world(target: Target, out_dir, *, n: int, max_new: int, eval_every: int, records_per_shard: int = 8,
                 seed: int = 1, max_prompt: int = 12):
    """Greedy responses of ``target`` to ``n`` seeded random prompts of 4 to ``max_prompt - 1``
    tokens (every ``eval_every``-th held out as eval) and their capture in ``out_dir``;
    returns ``(responses, cache)``."""
    from activation_wave.models.capture import capture
    from activation_wave.core.config import CaptureConfig, SpecConfig
    from activation_wave.models.prompts import Response
    from activation_wave.decode.baselines import plain_generate

    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(2, 120, (int(torch.randint(4, max_prompt, (1,), generator=g)),), generator=g).tolist()
               for _ in range(n)]
    res = plain_generate(target, prompts, SpecConfig(max_new_tokens=max_new, threads=1), impl="loop")
    responses = [Response(id=f"p{i}", prompt_ids=p, response_ids=r, finish="length", text="",
                          split="eval" if i % eval_every == eval_every - 1 else "train")
                 for i, (p, r) in enumerate(zip(prompts, res.token_ids))]
    cache = capture(target, responses, CaptureConfig(batch_size=8, max_length=64, records_per_shard=records_per_shard,
                                                     topk=8), out_dir=out_dir, progress=False)
    return responses, cache


def permutation_capture(target: Target, out_dir, *, n_prompts: int, max_new_tokens: int, seed: int,
                        records_per_shard: int = 8):
    """:func:`greedy_world` with prompts of 4 to 8 tokens, every 4th held out; the open cache."""
    return greedy_world(target, out_dir, n=n_prompts, max_new=max_new_tokens, eval_every=4,
                        records_per_shard=records_per_shard, seed=seed, max_prompt=9)[1]


#: Source of a quiet HTTP handler for the fake llama-server scripts the tests run as
#: subprocesses (``send(obj)`` answers 200 with ``obj`` as JSON, ``read_json()`` is the
#: request's JSON body, GET answers the health check): a script puts ``JSON_HANDLER`` on a line
#: of its own and subclasses ``JsonHandler``; :func:`fake_script` fills it in.
JSON_HANDLER_SRC = """class JsonHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def send(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def read_json(self):
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def do_GET(self):
        self.send({"status": "ok"})
"""


def fake_script(source: str) -> str:
    """A fake server script: ``source`` (which imports http.server and json) with its
    ``JSON_HANDLER`` line replaced by :data:`JSON_HANDLER_SRC`."""
    return source.replace("JSON_HANDLER\n", JSON_HANDLER_SRC, 1)


def install_fake_server(root, source: str):
    """``source`` (see :func:`fake_script`) as an executable ``llama-server`` in a llama.cpp
    build layout under ``root``; the :class:`LlamaCpp` that finds it."""
    import sys

    from activation_wave.engines.llamacpp import LlamaCpp

    server = root / "build" / "bin" / "llama-server"
    server.parent.mkdir(parents=True, exist_ok=True)
    server.write_text(f"#!{sys.executable}\n" + fake_script(source))
    server.chmod(0o755)
    return LlamaCpp(root)


def tiny_drafter_config(**draft):
    """The study config the tiny drafter tests train and score with: small one-epoch drafters,
    depth-2 chains without a draft threshold, 64-token statistics filtered at q = 0.5."""
    from activation_wave.core.config import DraftConfig, MetricsConfig, SpecConfig, StudyConfig

    return StudyConfig(draft=DraftConfig(draft_vocab=64, ttt_steps=2, epochs=1, lr=1e-2, batch_tokens=256, threads=1,
                                         workers=1, **draft),
                       spec=SpecConfig(depth=2, draft_threshold=0.0),
                       metrics=MetricsConfig(token_budget=64, filter_quantile=0.5))


def permutation_world(tokenizer, root, *, seed: int):
    """The permutation target and a 20-prompt capture of it under ``root``, with ``WAVE_CACHE``
    pointed there: returns ``(monkeypatch, target, cache)``; call ``monkeypatch.undo()`` after."""
    import pytest

    mp = pytest.MonkeyPatch()
    mp.setenv("WAVE_CACHE", str(root / "cache"))
    target = permutation_target(tokenizer)
    return mp, target, permutation_capture(target, root / "cap", n_prompts=20, max_new_tokens=16, seed=seed)


def copy_model_folder(src: Path, dest: Path, drop: tuple[str, ...] = (), **config) -> Path:
    """A copy of the model folder ``src`` at ``dest`` whose config.json has ``config`` set and
    ``drop`` removed (the hostile-input tests' edited model folders)."""
    dest.mkdir()
    for f in src.iterdir():
        (dest / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((dest / "config.json").read_text())
    cfg.update(config)
    for key in drop:
        cfg.pop(key, None)
    (dest / "config.json").write_text(json.dumps(cfg))
    return dest
