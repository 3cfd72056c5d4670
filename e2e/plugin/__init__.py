"""e2e's vLLM general plugin (entry point ``e2e.plugin:register`` in ``vllm.general_plugins``).

vLLM calls ``register()`` in every process it starts (the API server, the engine core, each
worker). The arm's settings arrive as JSON in ``E2E_PLUGIN_SETTINGS`` (its name in
``E2E_ARM``); with none, the plugin does nothing. ``register()`` installs import hooks and
logs one line per process; the settings take effect where vLLM creates the object they
change, and that process logs the line e2e checks before measuring::

    e2e-plugin: applied in worker (pid N, <where>): arm=<arm> <what> | settings=<json> | plugin_sha256=<hex> source=<folder>

``plugin_sha256`` is the hash of the plugin's and the kernels' sources (``e2e.plugin.source``)
computed here from the e2e folder this process imported them from, ``source`` that folder (to
the end of the line); the driver compares the hash with its own. Fields added later go after
`` | `` separators; readers take ``settings=`` up to the next `` | ``.

- builds with the DeepSeek-V4/V4.1 ROCm SWA builders (ROCm): ``e2e.plugin.rocm`` patches
  them; the line comes from the first builder constructed in a worker.
- other builds (the CPU default): ``e2e.plugin.inject`` wraps the model runner; the line
  comes from the model runner's constructor, which runs only in a worker.
- with ``perturb`` in the settings (either mode): ``e2e.plugin.perturb`` scales one layer's
  output of the model the model runner loads, a known change to the answers.
- with ``E2E_PINNED_ACCEPTANCE`` set (a pinned speculator, whatever the arm's settings):
  ``e2e.plugin.synthetic`` gives vLLM's CPU rejection kernels the synthetic branch they lack.

Every line starts with ``e2e-plugin:``; ``e2e.session.plugin_log`` reads them from the server log.
"""

from __future__ import annotations

import multiprocessing
import os
import sys

from e2e.plugin._hooks import when_imported
from e2e.plugin.source import package_dir, plugin_sha256
from e2e.arm_settings import PluginSettings, SettingsError, canonical

__all__ = ["register"]

PLUGIN_ENV = "E2E_PLUGIN_SETTINGS"
ARM_ENV = "E2E_ARM"
PIN_ENV = "E2E_PINNED_ACCEPTANCE"  # set when the speculator's acceptance is pinned
APPLIED = "e2e-plugin: applied in worker"
RUNNER_MODULE = "vllm.v1.worker.gpu_model_runner"


def _say(message: str) -> None:
    # vLLM configures its own loggers; print keeps the line in the server log whatever they do.
    print(f"e2e-plugin: {message}", flush=True)


def _role() -> str:
    name = multiprocessing.current_process().name
    return "api-server" if name == "MainProcess" else name


def provenance_fields() -> str:
    """`` | plugin_sha256=<hex> source=<folder>``: what this process's plugin is made of."""
    folder = package_dir()
    return f" | plugin_sha256={plugin_sha256(folder)} source={folder}"


def rocm_build() -> bool:
    """True on a ROCm torch: the build whose DeepSeek-V4/V4.1 SWA builders import."""
    try:
        import torch
    except ImportError:
        return False
    return getattr(torch.version, "hip", None) is not None


def register() -> None:
    pid = os.getpid()
    role = _role()
    if os.environ.get(PIN_ENV):  # acceptance pinned: vLLM's CPU kernels need the synthetic branch
        from e2e.plugin.synthetic import install

        install(_say, f"{role} (pid {pid})")
    raw = os.environ.get(PLUGIN_ENV)
    if not raw:
        _say(f"nothing to apply in {role} (pid {pid}): {PLUGIN_ENV} is not set")
        return
    arm = os.environ.get(ARM_ENV, "?")
    try:
        settings, data = PluginSettings.parse(raw)
    except SettingsError as exc:
        _say(f"not applied in {role} (pid {pid}): arm {arm}: {exc}")
        return
    text = canonical(data)

    def applied(where: str, what: str) -> None:
        _say(f"applied in worker (pid {os.getpid()}, {where}): arm={arm} {what} "
             f"| settings={text}{provenance_fields()}")

    if settings.perturb:  # on the model, whatever the mode (e2e.plugin.perturb)
        from e2e.plugin.perturb import patch_model_loading

        when_imported(RUNNER_MODULE, lambda module: patch_model_loading(
            module.GPUModelRunner, settings.perturb, _say))
    if rocm_build():
        from e2e.plugin.rocm import ROCM_MODULES, patch_rocm_module

        for name in ROCM_MODULES:
            when_imported(name, lambda module: patch_rocm_module(module, settings, applied))
        target = "a DeepSeek-V4/V4.1 ROCm SWA metadata builder"
    else:
        from e2e.plugin.inject import patch_model_runner

        def patch(module) -> None:
            patch_model_runner(module.GPUModelRunner, settings, applied, _say)

        when_imported(RUNNER_MODULE, patch)
        target = "a model runner"
    if role == "api-server" and "vllm.v1.worker.worker_base" not in sys.modules:
        _say(f"nothing applied in api-server (pid {pid}): the API server runs no model "
             f"runner; arm {arm}'s settings {text} apply in the worker (hooks installed "
             f"for processes forked from here)")
    else:
        _say(f"hooks installed in {role} (pid {pid}): arm {arm}'s settings {text} apply "
             f"when this process creates {target}")
