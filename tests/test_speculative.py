"""Speculative decoding is lossless: greedy == plain greedy, sampling keeps the target's law."""

import dataclasses
import json

import pytest
import torch
from scipy import stats

from activation_wave.models.capture import NORMED, capture, forward_batch
from activation_wave.core.config import CaptureConfig, DraftConfig, SpecConfig
from activation_wave.models.prompts import Response
from activation_wave.models.drafter import Eagle3Drafter, load_drafter
from activation_wave.decode.baselines import plain_generate, prompt_lookup_generate
from activation_wave.decode.rounds import SpecResult, merge_results
from activation_wave.decode.kernels import threads
from activation_wave.decode.offline import offline_acceptance
from activation_wave.decode.speculative import speculate, speculative_sample
from activation_wave.decode.costs import cost_model
from activation_wave.decode.timing import measure_costs, run_interleaved
from activation_wave.draft.training import train_drafter
from helpers import permutation_target

LAYERS = [1, 2, 4]


@pytest.fixture(scope="module")
def world(tiny_tokenizer, tmp_path_factory):
    """Target, prompts (every 5th held out), capture, a trained and an untrained drafter."""
    target = permutation_target(tiny_tokenizer)
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(2, 120, (int(torch.randint(4, 12, (1,), generator=g)),), generator=g).tolist()
               for _ in range(40)]
    res = plain_generate(target, prompts, SpecConfig(max_new_tokens=24, threads=1), impl="loop")
    responses = [Response(id=f"p{i}", prompt_ids=p, response_ids=r, finish="length", text="",
                          split="eval" if i % 5 == 4 else "train")
                 for i, (p, r) in enumerate(zip(prompts, res.token_ids))]
    cache = capture(target, responses, CaptureConfig(batch_size=8, max_length=64, records_per_shard=16, topk=8),
                    out_dir=tmp_path_factory.mktemp("cap"), progress=False)
    cfg = DraftConfig(draft_vocab=96, ttt_steps=3, epochs=30, lr=1e-2, batch_tokens=512, threads=1)
    path = train_drafter(target, cache, LAYERS, cfg, tmp_path_factory.mktemp("drafter"), progress=False)
    untrained = Eagle3Drafter.from_target(target.model, LAYERS, list(range(0, 128, 2)), seed=0).eval()
    return {"target": target, "responses": responses, "cache": cache, "trained": load_drafter(path, target),
            "untrained": untrained}


def _prompts(world, n=6):
    ev = [r for r in world["responses"] if r.split == "eval"]
    tr = [r for r in world["responses"] if r.split == "train"]
    return [r.prompt_ids for r in ev[:n]] + [r.prompt_ids for r in tr[:2]]


def test_decoding_feeds_the_drafter_the_captured_pre_norm_last_block(world, monkeypatch):
    """The features the decoding loop hands the drafter at index N (LAYERS ends at N = 4)
    are the capture's h.N, the last block before the final norm, not the normed entry."""
    target, drafter = world["target"], world["untrained"]
    n = target.n_layers
    assert LAYERS[-1] == n
    seen = []
    fuse = drafter.fuse
    monkeypatch.setattr(drafter, "fuse", lambda h: seen.append(h.detach().clone()) or fuse(h))
    rec = next(world["cache"].iter_records([n, NORMED], split="eval"))
    prompt = rec.input_ids[: rec.prompt_len].tolist()
    speculate(target, drafter, [prompt], SpecConfig(depth=2, max_new_tokens=4, threads=1))
    H = target.hidden_size
    fed = seen[0][0, :, -H:]  # the prefill's features [n_prompt, H] at index N (the last of LAYERS)
    ref = forward_batch(target.model, [prompt], [len(prompt)])["hidden"]  # [N+2, T, H]: N pre-norm, normed
    torch.testing.assert_close(fed, ref[n], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(fed, rec.hidden[n][: len(prompt)], atol=2e-2, rtol=1e-2)  # the cache (fp16)
    assert not torch.allclose(fed, rec.hidden[NORMED][: len(prompt)], atol=0.1)
    assert float((fed - ref[n + 1]).abs().max()) > 0.1


@pytest.mark.parametrize("which", ["trained", "untrained"])
@pytest.mark.parametrize("depth", [1, 3, 5])
def test_greedy_chain_equals_plain_greedy(world, which, depth):
    prompts = _prompts(world)
    cfg = SpecConfig(depth=depth, max_new_tokens=24, threads=1)
    plain = plain_generate(world["target"], prompts, cfg)
    spec = speculate(world["target"], world[which], prompts, cfg)
    assert spec.token_ids == plain.token_ids
    assert spec.method == "eagle3-chain" and spec.tau >= 1.0
    if which == "trained" and depth > 1:
        assert spec.tau > 1.5  # drafts are accepted, so multi-token acceptance paths are exercised


@pytest.mark.parametrize("which", ["trained", "untrained"])
@pytest.mark.parametrize(("topk", "size", "depth"), [(2, 4, 3), (3, 10, 4), (4, 20, 4)])
def test_greedy_tree_equals_plain_greedy(world, which, topk, size, depth):
    prompts = _prompts(world)
    cfg = SpecConfig(depth=depth, max_new_tokens=24, tree_topk=topk, tree_size=size, threads=1)
    plain = plain_generate(world["target"], prompts, cfg)
    spec = speculate(world["target"], world[which], prompts, cfg)
    assert spec.method == "eagle3-tree"
    assert spec.token_ids == plain.token_ids


def test_tree_beats_chain_on_a_good_drafter(world):
    prompts = _prompts(world)
    chain = speculate(world["target"], world["trained"], prompts, SpecConfig(depth=4, max_new_tokens=24, threads=1))
    tree = speculate(world["target"], world["trained"], prompts,
                     SpecConfig(depth=4, max_new_tokens=24, tree_topk=3, tree_size=12, threads=1))
    assert tree.tau >= chain.tau


def test_plain_loop_and_prompt_lookup_equal_generate(world):
    prompts = _prompts(world)
    cfg = SpecConfig(max_new_tokens=24, threads=1, prompt_lookup_tokens=3)
    hf = plain_generate(world["target"], prompts, cfg)
    loop = plain_generate(world["target"], prompts, cfg, impl="loop")
    pl = prompt_lookup_generate(world["target"], prompts, cfg)
    assert hf.token_ids == loop.token_ids == pl.token_ids
    # the stop rule: a response ends at its first end token or at max_new_tokens
    for toks in hf.token_ids:
        assert len(toks) == 24 or (toks[-1] == 1 and 1 not in toks[:-1])
    assert any(len(t) < 24 for t in hf.token_ids)  # some responses do stop early


def test_interleaved_timing_pools_to_the_batch_results(world):
    """Prompt-by-prompt interleaving (rotated order, per-prompt seeds) gives each method the
    tokens, tau and acceptance of one call over all prompts, at T = 0 and T = 1."""
    prompts = _prompts(world)
    target, drafter = world["target"], world["trained"]
    c0 = SpecConfig(max_new_tokens=16, threads=1, depth=3)
    c1 = SpecConfig(max_new_tokens=16, threads=1, depth=3, temperature=1.0, seed=5)
    methods = {"plain": lambda p, c: plain_generate(target, [p], c(c0)),
               "chain": lambda p, c: speculate(target, drafter, [p], c(c0)),
               "chain T=1": lambda p, c: speculate(target, drafter, [p], c(c1))}
    res = run_interleaved(methods, [(f"q{i}", p) for i, p in enumerate(prompts)])
    batch = {"plain": plain_generate(target, prompts, c0), "chain": speculate(target, drafter, prompts, c0),
             "chain T=1": speculate(target, drafter, prompts, c1)}
    for name, ref in batch.items():
        got = res[name]
        assert got.token_ids == ref.token_ids, name
        assert [p["id"] for p in got.per_prompt] == [f"q{i}" for i in range(len(prompts))]
        assert got.tau == pytest.approx(ref.tau) and got.n_prompts == len(prompts)
        assert got.accept_hist == ref.accept_hist
        assert got.acceptance_by_position == pytest.approx(ref.acceptance_by_position, nan_ok=True)
        assert got.tokens_per_s > 0
    assert res["plain"].tau == 1.0
    one = merge_results([batch["chain"]])
    assert one.token_ids == batch["chain"].token_ids and one.tau == pytest.approx(batch["chain"].tau)
    # a result cut to some prompts pools to what those prompts alone give
    for name, ref in batch.items():
        part = merge_results([dataclasses.replace(ref, per_prompt=ref.per_prompt[:3])])
        alone = merge_results([dataclasses.replace(res[name], per_prompt=res[name].per_prompt[:3])])
        direct = {"plain": lambda: plain_generate(target, prompts[:3], c0),
                  "chain": lambda: speculate(target, drafter, prompts[:3], c0),
                  "chain T=1": lambda: speculate(target, drafter, prompts[:3], c1)}[name]()
        for got in (part, alone):
            assert got.token_ids == direct.token_ids and got.accept_hist == direct.accept_hist, name
            assert got.target_forwards == direct.target_forwards and got.tau == pytest.approx(direct.tau, nan_ok=True)
    with pytest.raises(ValueError, match="at least one"):
        merge_results([])


def test_offline_acceptance_matches_online(world):
    """At T=0 the replay of cached greedy responses gives the online rounds exactly."""
    ev = [r for r in world["responses"] if r.split == "eval"]
    for depth, thr in ((2, 0.0), (3, 0.0), (4, 0.9)):
        online = speculate(world["target"], world["trained"], [r.prompt_ids for r in ev],
                           SpecConfig(depth=depth, max_new_tokens=24, threads=1, draft_threshold=thr))
        off = offline_acceptance(world["trained"], world["cache"], depth, split="eval", max_new_tokens=24,
                                 threshold=thr)
        assert [p["accepted"] for p in off["per_record"]] == [p["accepted"] for p in online.per_prompt]
        assert off["tau_offline"] == pytest.approx(online.tau)
        if thr == 0:  # with a dynamic length, drafts after a mismatch may differ (they never count)
            assert off["acceptance_by_position"] == pytest.approx(online.acceptance_by_position)
        assert off["tau_all_anchors"] > 1.0 and len(off["acceptance_all_anchors"]) == depth
    assert any(k < 4 for p in online.per_prompt for k in p["drafted"])  # the threshold did cut chains


def test_result_json_and_tree_at_temperature_falls_back(world):
    res = speculate(world["target"], world["trained"], _prompts(world, 2),
                    SpecConfig(depth=3, max_new_tokens=8, temperature=0.7, tree_topk=3, threads=1))
    assert res.method == "eagle3-chain" and "tree drafting at T > 0" in res.notes[0]
    back = json.loads(json.dumps(res.to_json(), allow_nan=False))
    assert back["per_prompt"][0]["token_ids"] == res.token_ids[0]
    assert SpecResult(**back).tau == res.tau
    assert all(0.0 <= a <= 1.0 for a in res.acceptance_by_position)


def _chi2_pvalue(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Chi-square goodness of fit, pooling categories with expected count < 5."""
    n = counts.sum()
    exp = probs.double() * n
    small = exp < 5
    obs = torch.cat([counts[~small].double(), counts[small].double().sum().view(1)])
    exp = torch.cat([exp[~small], exp[small].sum().view(1)])
    keep = exp > 0
    return float(stats.chisquare(obs[keep].numpy(), exp[keep].numpy() * obs[keep].sum().item() / exp[keep].sum().item()).pvalue)


def test_speculative_sample_rule_is_exact():
    """Synthetic p and q: the first emitted token follows p, whatever q proposes."""
    g = torch.Generator().manual_seed(0)
    V, D, N = 6, 2, 10000
    p_logits = torch.randn(D + 1, V, generator=g) * 1.5
    q = torch.softmax(torch.randn(D, V, generator=g) * 2, -1)
    q[:, 5] = 0.0  # a token outside the draft vocabulary: only the residual can produce it
    q = q / q.sum(-1, keepdim=True)
    p = torch.softmax(p_logits, -1)
    first = torch.zeros(V)
    n_acc = 0
    with threads(1):  # many tiny ops: extra threads only add contention
        for _ in range(N):
            drafts = [int(torch.multinomial(q[i], 1, generator=g)) for i in range(D)]
            n, nxt = speculative_sample(p_logits, q, drafts, 1.0, g)
            first[(drafts + [nxt])[0] if n >= 1 else nxt] += 1
            n_acc += n >= 1
    assert _chi2_pvalue(first, p[0]) > 1e-3
    assert 0.5 * (p[0] - q[0]).abs().sum() > 0.2  # q is far from p: an "always accept" bug would fail
    expected_accept = torch.minimum(p[0], q[0]).sum().item()
    assert abs(n_acc / N - expected_accept) < 4 * (expected_accept * (1 - expected_accept) / N) ** 0.5


class _NoEos:
    pad_token_id = 0
    eos_token_id = None


def test_sampled_speculative_decoding_keeps_the_target_distribution():
    """End to end at T=1: the tokens of a speculative round follow the target's law.

    Token 1 comes from the prefill; tokens 2 and 3 come from one round with two drafts
    (accepted, or resampled from the residual), so their marginals test the rule.
    """
    target = permutation_target(_NoEos(), vocab=16, scale=0.5)
    model = target.model
    drafter = Eagle3Drafter.from_target(model, LAYERS, list(range(12)), seed=0).eval()  # q far from p
    prompt = [3, 7, 2, 9]
    N = 600
    cfg = SpecConfig(depth=2, max_new_tokens=4, temperature=1.0, seed=123, threads=1)
    res = speculate(target, drafter, [prompt] * N, cfg)  # generator seeded per prompt index
    toks = torch.tensor(res.token_ids)
    with torch.no_grad():
        p1 = torch.softmax(model(torch.tensor([prompt])).logits[0, -1], -1)
        two = torch.tensor([prompt + [a] for a in range(16)])
        p2_given = torch.softmax(model(two).logits[:, -1], -1)  # [16, 16]: p(x2 | x1)
        three = torch.tensor([prompt + [a, b] for a in range(16) for b in range(16)])
        p3_given = torch.softmax(model(three).logits[:, -1], -1).view(16, 16, 16)  # p(x3 | x1, x2)
    p2 = p1 @ p2_given
    p3 = torch.einsum("a,ab,abc->c", p1, p2_given, p3_given)
    assert _chi2_pvalue(torch.bincount(toks[:, 1], minlength=16).float(), p2) > 1e-3
    assert _chi2_pvalue(torch.bincount(toks[:, 2], minlength=16).float(), p3) > 1e-3
    assert 0.2 < res.acceptance_by_position[0] < 0.9  # both accept and resample paths ran
    assert (toks[:, 1:] >= 12).any()  # tokens outside the draft vocabulary come from the residual


def test_cost_model(world):
    costs = measure_costs(world["target"], world["trained"], context=16, depth=3, extra_sizes=[8], reps=2,
                          n_threads=1)
    assert sorted(costs["verify_ms"]) == [1, 2, 3, 4, 8]
    assert costs["step_ms"] == costs["verify_ms"][1] and costs["draft_step_ms"] > 0 and costs["draft_chain_ms"] > 0
    fake = {"depth": 4, "step_ms": 100.0, "verify_ms": {1: 100.0, 5: 120.0}, "draft_chain_ms": 20.0}
    cm = cost_model(2.8, fake)
    assert cm["round_ms"] == 140.0 and cm["speedup"] == pytest.approx(2.0)
    assert cm["ceiling"] == pytest.approx(5 * 100 / 140) and cm["break_even_tau"] == pytest.approx(1.4)


@pytest.mark.integration
def test_real_model_greedy_speculation_is_lossless():
    """SmolLM2-135M: speculative greedy == plain greedy with an untrained drafter, chain and tree."""
    from activation_wave.models.prompts import chat_ids
    from activation_wave.core.layers import eagle3_default_layers
    from activation_wave.models.targets import load_target

    target = load_target("smollm2-135m")
    layers = eagle3_default_layers(target.n_layers)
    drafter = Eagle3Drafter.from_target(target.model, layers, torch.arange(0, target.vocab_size, 8)).eval()
    prompts = [chat_ids(target, "Write a Python function that reverses a string."),
               chat_ids(target, "What is the capital of France?")]
    for cfg in (SpecConfig(depth=3, max_new_tokens=16, threads=1),
                SpecConfig(depth=3, max_new_tokens=16, tree_topk=3, tree_size=8, threads=1)):
        plain = plain_generate(target, prompts, cfg)
        spec = speculate(target, drafter, prompts, cfg)
        assert spec.token_ids == plain.token_ids


def test_drafter_loaded_without_target_is_attached_by_speculate(world, tmp_path):
    from activation_wave.models.drafter import save_drafter

    path = save_drafter(world["trained"], tmp_path / "d", world["trained"].provenance)
    bare = load_drafter(path)  # as `wave speculate` loads it
    cfg = SpecConfig(depth=3, max_new_tokens=12, threads=1)
    prompts = _prompts(world, 2)
    assert speculate(world["target"], bare, prompts, cfg).token_ids == plain_generate(world["target"], prompts, cfg).token_ids


def test_decoding_figures(world):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from activation_wave.plots.drafters import (
        plot_acceptance_by_position,
        plot_cost_model,
        plot_score_vs_tau,
        plot_tau,
        plot_training_curves,
        plot_verify_cost,
    )

    costs = {"depth": 3, "step_ms": 60.0, "verify_ms": {1: 60.0, 2: 65.0, 3: 70.0, 4: 80.0},
             "draft_step_ms": 2.0, "draft_chain_ms": 7.0}
    figs = [
        plot_acceptance_by_position({"eagle3-default": [0.5, 0.3, 0.2], "combined": [0.6, 0.4, 0.2]}),
        plot_tau(["eagle3-default", "combined"], [1.8, 2.0], lo=[1.7, 1.9], hi=[1.9, 2.1]),
        plot_score_vs_tau([0.1, 0.3, 0.2, 0.5], [1.5, 1.8, 1.6, 2.0], ["a", "b", "c", "d"]),
        plot_cost_model(costs, measured=[(1.9, 1.3, "eagle3-default")]),
        plot_verify_cost(costs),
        plot_training_curves({"epochs": [{"loss_by_step": [3.0, 3.5]}, {"loss_by_step": [2.0, 2.6]}]}),
    ]
    assert "Spearman rho = 1.00" in figs[2].axes[0].get_title()
    for f in figs:
        ax = f.axes[0]
        assert ax.get_xlabel() and ax.get_ylabel()
        plt.close(f)


def test_fast_kernels_are_idempotent_reversible_and_exact(tiny_tokenizer):
    from activation_wave.decode.kernels import PackedLinear, set_kernels

    target = permutation_target(tiny_tokenizer, seed=7)
    model = target.model
    x = torch.randint(0, 128, (1, 9))
    with torch.no_grad():
        ref = model(x, use_cache=True)
        more = torch.randint(0, 128, (1, 4))
        ref2 = model(more, cache=ref.cache).logits  # 4 tokens after a cache: the masked GQA path
        state = set_kernels(model, "fast")
        assert state == set_kernels(model, "fast")  # idempotent
        fast = model(x, use_cache=True)
        torch.testing.assert_close(fast.logits, ref.logits, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(model(more, cache=fast.cache).logits, ref2, atol=1e-4, rtol=1e-4)
        assert set_kernels(model, "hf") == {"linear": "hf", "attention": "sdpa"}
        assert not any(isinstance(m, PackedLinear) for m in model.modules())
        torch.testing.assert_close(model(x).logits, ref.logits)


def test_tiled_mask_is_reused_for_the_same_mask_and_rebuilt_for_a_new_one():
    from activation_wave.decode.kernels import _tiled_mask

    a = torch.rand(1, 1, 4, 7) > 0.5
    b = ~a
    ta = _tiled_mask(a, 3)
    assert torch.equal(ta, a.repeat(1, 1, 3, 1)) and _tiled_mask(a, 3) is ta
    assert torch.equal(_tiled_mask(b, 3), b.repeat(1, 1, 3, 1))
    assert torch.equal(_tiled_mask(b, 2), b.repeat(1, 1, 2, 1))


def test_online_comparison_runs_every_method_and_counts_identical_outputs(world):
    """One comparison for chapter 6 and the benchmark: baselines and each drafter's chain
    (T = 0 and 1) and tree, interleaved; greedy speculation equals plain greedy."""
    from activation_wave.study.chapters.eagle3_speedup import online_figures
    from activation_wave.decode.comparison import compare_online

    prompts = [(f"q{i}", p) for i, p in enumerate(_prompts(world, 3)[:3])]
    spec = SpecConfig(depth=3, max_new_tokens=12, tree_topk=2, tree_size=4, threads=1)
    drafters = {"good": world["trained"], "raw": world["untrained"]}
    cmp = compare_online(world["target"], drafters, prompts, spec, rounds=2)
    kinds = ("chain_t0", "chain_t1", "tree_t0")
    assert list(cmp.pooled) == ["plain_t0", "prompt_lookup_t0", "plain_t1", *(f"{d}_{k}" for d in drafters for k in kinds)]
    assert cmp.prompt_ids == ("q0", "q1", "q2") and len(cmp.per_round) == 2
    assert cmp.identical("good_chain_t0") == cmp.identical("raw_tree_t0") == 6  # 3 prompts x 2 rounds
    assert cmp.pooled["plain_t0"].n_prompts == 6 and cmp.pooled["plain_t1"].temperature == 1.0
    ratio = cmp.speedup("good_chain_t0", "plain_t0")
    assert ratio == pytest.approx(cmp.pooled["good_chain_t0"].tokens_per_s / cmp.pooled["plain_t0"].tokens_per_s)
    assert min(cmp.round_speedups("good_chain_t0", "plain_t0")) <= ratio <= max(
        cmp.round_speedups("good_chain_t0", "plain_t0"))
    fig = online_figures(cmp, "good", LAYERS, tau_offline=1.5)
    assert fig.lossless_prompts == 6 and fig.n_prompts == 3 and fig.tau_t0 == cmp.pooled["good_chain_t0"].tau
    assert fig.tau_t0 > 1.2 and fig.lossless_prompts_tree == 6 and fig.layers == tuple(LAYERS)
    # a drafter named in ``kinds`` decodes only those methods (the benchmark's adopted drafter: chain at T = 0)
    few = compare_online(world["target"], drafters, prompts[:1], spec, kinds={"raw": ("chain_t0",)})
    assert list(few.pooled) == ["plain_t0", "prompt_lookup_t0", "plain_t1", *(f"good_{k}" for k in kinds),
                                "raw_chain_t0"]
    with pytest.raises(ValueError, match="unknown method 'chain_t2'"):
        compare_online(world["target"], drafters, prompts[:1], spec, kinds={"raw": ("chain_t2",)})
