"""Calibration of the output check: a small, known change to the model's numerics.

``perturb`` (a plugin setting, e.g. ``1e-3``) scales the output of the first decoder layer's
MLP (the first module named ``*layers.0.mlp``; a model without one: the first ``*layers.0``,
its hidden states) by ``1 + perturb`` in every forward, through a forward hook registered on
the model right after the worker's model runner loads it, before vLLM compiles it or
captures graphs, so every forward carries it. The residual stream then differs from the
baseline's by a relative ``perturb`` of one layer's contribution: logits move by about that
much, and a greedy choice between two tokens whose logits are closer than that flips. The
answers of such an arm differ from main's on some prompts (the output check's known
positive, as the delay arms are the speed statistics'), while its speed is main's (one
multiplication per forward).

It works in either plugin mode (inject on the CPU default, rocm on the DeepSeek builds): the
hook is on the model, not on the SWA builders.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

__all__ = ["TARGETS", "perturb_model", "patch_model_loading"]

TARGETS = (".layers.0.mlp", ".layers.0")
"""Where the hook goes: the first module whose name ends with one of these, in this order."""


class PerturbError(RuntimeError):
    """The model has no module the perturbation can go on."""


def perturb_model(model: Any, rel: float) -> str:
    """Register the hook on ``model`` (an ``nn.Module``); returns the module's name."""
    import torch

    names = dict(model.named_modules())
    for suffix in TARGETS:
        found = next((n for n in names if ("." + n).endswith(suffix)), None)
        if found is not None:
            break
    else:
        raise PerturbError(f"perturb: the model ({type(model).__name__}) has no module named "
                           f"*{TARGETS[0]} or *{TARGETS[1]} to scale")
    factor = 1.0 + rel

    def scale(module, args, output):
        if isinstance(output, torch.Tensor):
            return output * factor
        if isinstance(output, tuple) and output and isinstance(output[0], torch.Tensor):
            return (output[0] * factor, *output[1:])
        return output

    names[found].register_forward_hook(scale)
    return found


def patch_model_loading(cls: type, rel: float, say: Callable[[str], None]) -> None:
    """Wrap ``cls.__init__`` so that each model runner's ``load_model`` (its own class's,
    a subclass's override included) perturbs the model it loaded. Idempotent per class."""
    if cls.__dict__.get("_e2e_perturb_patched"):
        return
    original_init = cls.__init__

    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        load = self.load_model  # bound: the runner's own class's method

        def load_model(*a, **k):
            out = load(*a, **k)
            model = self.get_model() if hasattr(self, "get_model") else self.model
            name = perturb_model(model, rel)
            say(f"perturbation in worker (pid {os.getpid()}): the output of {name} "
                f"({type(model).__name__}) is scaled by (1 + {rel:g}) in every forward")
            return out

        self.load_model = load_model

    __init__.__wrapped__ = original_init  # type: ignore[attr-defined]
    cls.__init__ = __init__
    cls._e2e_perturb_patched = True
