"""The numerics-perturbing calibration setting (``perturb``): parsed and bounded, its hook on
the first decoder layer's MLP of the model the runner loads (a subclass's own ``load_model``
included, as vLLM's CPUModelRunner overrides it), and what it changes of a real torch model's
outputs. That it changes a real server's greedy answers is tests/test_outputs_server.py's."""

from __future__ import annotations

import json
import sys
from types import ModuleType

import pytest
import torch
from torch import nn

import e2e.plugin as plugin
from e2e.plugin.perturb import PerturbError, patch_model_loading, perturb_model
from e2e.arm_settings import PluginSettings, SettingsError


class Layer(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.attn = nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.SiLU(), nn.Linear(2 * width, width))

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.mlp(x)


class TinyModel(nn.Module):
    """Llama-shaped names: model.layers.N.mlp, then a head over a small vocabulary."""

    def __init__(self, width: int = 16, layers: int = 2, vocab: int = 50) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.model = nn.Module()
        self.model.layers = nn.ModuleList(Layer(width) for _ in range(layers))
        self.head = nn.Linear(width, vocab)

    def forward(self, x):
        for layer in self.model.layers:
            x = layer(x)
        return self.head(x)


def test_the_setting_is_a_small_relative_number():
    assert PluginSettings.parse('{"perturb": 1e-3}')[0].perturb == 1e-3
    assert PluginSettings.parse('{"perturb": 0}')[0].perturb == 0.0
    assert PluginSettings.parse("{}")[0].perturb == 0.0
    for bad in ('"1e-3"', "true", "-1e-3", "0.5", "NaN", "[1]"):
        with pytest.raises(SettingsError, match="perturb must be a number from 0 to 0.1"):
            PluginSettings.parse(f'{{"perturb": {bad}}}')


def test_the_hook_scales_the_first_layer_s_mlp_output():
    model = TinyModel()
    x = torch.randn(4, 16)
    mlp = model.model.layers[0].mlp
    h = model.model.layers[0].attn(x) + x
    plain = mlp(h)
    assert perturb_model(model, 1e-3) == "model.layers.0.mlp"
    assert torch.allclose(mlp(h), plain * (1 + 1e-3), rtol=0, atol=1e-7)
    assert torch.equal(model.model.layers[1].mlp(h), model.model.layers[1].mlp(h))  # untouched


def test_a_model_without_such_a_layer_is_refused_by_name():
    with pytest.raises(PerturbError, match="no module named"):
        perturb_model(nn.Sequential(nn.Linear(2, 2)), 1e-3)


def test_it_changes_some_greedy_choices_of_a_random_model_and_only_slightly():
    model, x = TinyModel(), torch.randn(4000, 16)
    with torch.no_grad():
        before = model(x)
        perturb_model(model, 1e-3)
        after = model(x)
    relative = ((after - before).norm(dim=1) / before.norm(dim=1)).median()
    flipped = (after.argmax(1) != before.argmax(1)).sum().item()
    assert 1e-5 < relative < 1e-2
    assert 0 < flipped < 40  # a few near-ties of 4000 flip, nearly all choices stay


def test_register_wraps_a_subclass_s_own_load_model(monkeypatch, capsys):
    """As vLLM's CPUModelRunner: a subclass of GPUModelRunner with its own load_model."""
    module = ModuleType(plugin.RUNNER_MODULE)

    class GPUModelRunner:
        def __init__(self):
            self.device = torch.device("cpu")

        def load_model(self):
            raise AssertionError("the subclass's load_model is the one called")

        def execute_model(self, scheduler_output, intermediate_tensors=None):
            return "output"

    class CPUModelRunner(GPUModelRunner):
        def load_model(self):
            self.model = TinyModel()

        def get_model(self):
            return self.model

    module.GPUModelRunner = GPUModelRunner
    monkeypatch.setitem(sys.modules, plugin.RUNNER_MODULE, module)
    monkeypatch.setattr(plugin, "rocm_build", lambda: False)
    settings = {"packing": "main", "perturb": 1e-3}
    monkeypatch.setenv(plugin.PLUGIN_ENV, json.dumps(settings))
    monkeypatch.setenv(plugin.ARM_ENV, "perturb-1e-3")
    plugin.register()
    runner = CPUModelRunner()
    runner.load_model()
    assert runner.model.model.layers[0].mlp._forward_hooks
    assert not runner.model.model.layers[1].mlp._forward_hooks
    out = capsys.readouterr().out
    assert "perturb=0.001 (first layer's MLP output x (1 + 0.001))" in out
    assert "the output of model.layers.0.mlp (TinyModel) is scaled by (1 + 0.001)" in out
    patch_model_loading(GPUModelRunner, 1e-3, print)  # a second patch: no second hook
    again = CPUModelRunner()
    again.load_model()
    assert len(again.model.model.layers[0].mlp._forward_hooks) == 1
