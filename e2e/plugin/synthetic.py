"""Synthetic rejection sampling on vLLM's CPU build: the branch its CPU kernels lack.

vLLM 0.32 holds acceptance at a fixed schedule with ``rejection_sample_method = "synthetic"``
(``synthetic_acceptance_length`` resolved by ``SpeculativeConfig._acceptance_length_to_rates``
to per-position *unconditional* rates, turned by ``unconditional_to_conditional_rates`` into
conditional ones, c_i = p_i / p_(i-1)). Its rejection sampler hands the conditional rates and
one uniform draw per draft token to the rejection kernels; the Triton kernels accept draft
token i of a request when ``uniform < c_i`` and the draft id is not padding (-1), stop at the
first rejection (the target's token there: its argmax for greedy requests, the recovered token
for random ones), and append the bonus token when nothing was rejected. On a CPU host vLLM
replaces those kernels with C++ ones (``vllm.utils.cpu_triton_utils``) that assert
``not SYNTHETIC_MODE`` (the engine dies at the first request).

``install`` wraps the two CPU replacements as soon as that module is imported: with
``SYNTHETIC_MODE`` they run the Triton kernels' synthetic branch here (vLLM's rates and vLLM's
uniform draws, so the schedule is vLLM's own); without it they call vLLM's C++ kernel
unchanged. Nothing else of vLLM is touched; on builds with Triton the wrapped functions are
never called.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from types import ModuleType

__all__ = ["CPU_KERNELS", "install", "greedy_synthetic", "random_synthetic", "wrap"]

CPU_KERNELS = "vllm.utils.cpu_triton_utils"
_GREEDY = "_rejection_greedy_sample_kernel_impl"
_RANDOM = "_rejection_random_sample_kernel_impl"


def _spans(cu_num_draft_tokens) -> list[tuple[int, int]]:
    ends = [int(x) for x in cu_num_draft_tokens.tolist()]
    return list(zip([0, *ends[:-1]], ends))


def _synthetic(output_token_ids, cu_num_draft_tokens, draft_token_ids, fallback_token_ids,
               bonus_token_ids, uniform_probs, synthetic_conditional_rates, skip) -> None:
    """The synthetic branch both kernels share, one request at a time (``skip``: the
    requests the other kernel samples): a draft token is accepted when its uniform draw is
    under its position's rate (padding, -1, never is); at the first rejection the request
    takes the fallback token (the target's argmax, or the recovered token) and stops; with
    nothing rejected it takes the bonus token."""
    import torch

    out = output_token_ids.tolist()
    drafts, fallback = draft_token_ids.tolist(), fallback_token_ids.tolist()
    uniform, rates = uniform_probs.tolist(), synthetic_conditional_rates.tolist()
    bonus = bonus_token_ids.reshape(-1).tolist()
    for req, (start, end) in enumerate(_spans(cu_num_draft_tokens)):
        if skip(req):
            continue
        for pos in range(end - start):
            draft = int(drafts[start + pos])
            if draft < 0 or not uniform[start + pos] < rates[pos]:
                out[req][pos] = int(fallback[start + pos])
                break
            out[req][pos] = draft
        else:
            out[req][end - start] = int(bonus[req])
    output_token_ids.copy_(torch.tensor(out, dtype=output_token_ids.dtype))


def greedy_synthetic(output_token_ids, cu_num_draft_tokens, draft_token_ids, target_argmax,
                     bonus_token_ids, is_greedy, max_spec_len, uniform_probs,
                     synthetic_conditional_rates) -> None:
    """``rejection_greedy_sample_kernel`` with ``SYNTHETIC_MODE`` (vLLM 0.32): non-greedy
    requests are left to the random kernel; a rejected position takes the target's argmax."""
    greedy = None if is_greedy is None else is_greedy.tolist()
    _synthetic(output_token_ids, cu_num_draft_tokens, draft_token_ids, target_argmax,
               bonus_token_ids, uniform_probs, synthetic_conditional_rates,
               skip=lambda req: greedy is not None and not greedy[req])


def random_synthetic(output_token_ids, cu_num_draft_tokens, draft_token_ids, bonus_token_ids,
                     recovered_token_ids, uniform_probs, is_greedy, max_spec_len,
                     synthetic_conditional_rates) -> None:
    """``rejection_random_sample_kernel`` with ``SYNTHETIC_MODE`` (vLLM 0.32): greedy requests
    are left to the greedy kernel; a rejected position takes the recovered token."""
    greedy = is_greedy.tolist()
    _synthetic(output_token_ids, cu_num_draft_tokens, draft_token_ids, recovered_token_ids,
               bonus_token_ids, uniform_probs, synthetic_conditional_rates,
               skip=lambda req: greedy[req])


def wrap(original: Callable, synthetic: Callable, keys: tuple[str, ...]) -> Callable:
    """``original`` (a CPU kernel replacement), but with ``SYNTHETIC_MODE`` true it calls
    ``synthetic`` with the arguments named ``keys``. The signature stays the original's, so
    vLLM's dispatcher binds launch arguments to it as before."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def kernel(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        named = bound.arguments
        if not named.get("SYNTHETIC_MODE"):
            return original(*args, **kwargs)
        return synthetic(**{k: named[k] for k in keys})

    kernel.e2e_synthetic = True  # type: ignore[attr-defined]
    return kernel


_GREEDY_KEYS = ("output_token_ids", "cu_num_draft_tokens", "draft_token_ids", "target_argmax",
                "bonus_token_ids", "is_greedy", "max_spec_len", "uniform_probs",
                "synthetic_conditional_rates")
_RANDOM_KEYS = ("output_token_ids", "cu_num_draft_tokens", "draft_token_ids", "bonus_token_ids",
                "recovered_token_ids", "uniform_probs", "is_greedy", "max_spec_len",
                "synthetic_conditional_rates")


def patch(module: ModuleType, say: Callable[[str], None], where: str) -> None:
    """Wrap the module's two rejection kernels (once); say what was done, or why not."""
    missing = [n for n in (_GREEDY, _RANDOM) if not callable(getattr(module, n, None))]
    if missing:
        say(f"synthetic acceptance not installed in {where}: {CPU_KERNELS} has no "
            f"{', '.join(missing)} (another vLLM version): the engine will refuse synthetic "
            "sampling on the CPU")
        return
    for name, synthetic, keys in ((_GREEDY, greedy_synthetic, _GREEDY_KEYS),
                                  (_RANDOM, random_synthetic, _RANDOM_KEYS)):
        current = getattr(module, name)
        if not getattr(current, "e2e_synthetic", False):
            setattr(module, name, wrap(current, synthetic, keys))
    say(f"synthetic acceptance installed in {where}: vLLM's CPU rejection kernels take "
        "rejection_sample_method='synthetic' (the Triton kernels' synthetic branch, vLLM's "
        "rates and uniform draws)")


def install(say: Callable[[str], None], where: str | None = None) -> None:
    """Patch ``vllm.utils.cpu_triton_utils`` when this process imports it."""
    from e2e.plugin._hooks import when_imported

    where = where or f"pid {os.getpid()}"
    when_imported(CPU_KERNELS, lambda module: patch(module, say, where))
