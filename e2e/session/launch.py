"""Resolve an arm into its server launch: the build (a managed environment is created when
needed), the model, the flags, the environment and the plugin settings."""

from __future__ import annotations

import json
import os
from pathlib import Path

from typing import Any

from e2e.arms import ARM_ENV, PIN_ENV, PLUGIN_ENV, ServerLaunch
from e2e.config import Experiment
from e2e.errors import ConfigError
from e2e.kinds import KINDS
from e2e.session.builds import prepare, python_path
from e2e.session.plugin_copy import SERVER_ENV, plugin_tree, server_pythonpath
from e2e.session.tinymodel import model_path, resolve_model
from e2e.arms import PIN_KEY

__all__ = ["server_launch", "speculative_config"]


def server_launch(
    experiment: Experiment, arm: str, *, dspark: bool, python: Path | None = None,
    progress=lambda message: None, dry: bool = False,
) -> ServerLaunch:
    """Resolve an arm into its server launch: build (creating a managed env if needed), model,
    flags, environment and plugin settings, and this e2e's plugin first on the server's
    ``PYTHONPATH`` (``e2e.session.plugin_copy``). ``dry`` builds nothing: it names the paths
    a build would have."""
    settings = experiment.arm(arm)
    server = experiment.server
    build = settings.build or server.build
    build_info: dict = {"kind": build.kind}
    if python is None:
        if dry:
            python = python_path(build)
        else:
            prepared = prepare(build, progress=progress)
            python, build_info = prepared.python, prepared.describe()
    model, model_hash = (model_path(server.model), None) if dry else resolve_model(server.model)
    args = ["--model", model, *server.args, *settings.args]
    kind = KINDS[server.kind]
    pinned = experiment.pinned() if dspark else None
    if dspark:
        args += kind.speculative_args(speculative_config(experiment))
    if server.api_key:
        args += ["--api-key", server.api_key]
    env = {**server.env, **settings.env, ARM_ENV: arm}
    # the driver's own plugin first on the server's path, whatever the environment has; and
    # no working folder ahead of it (``python -m`` puts the current folder first, and a
    # server started in a checkout would import that checkout's e2e): Python >= 3.11
    tree = plugin_tree(create=not dry)
    env["PYTHONPATH"] = server_pythonpath(tree, env.get("PYTHONPATH",
                                                        os.environ.get("PYTHONPATH")))
    env["PYTHONSAFEPATH"] = "1"
    env.update(SERVER_ENV)  # and no bytecode written into that folder
    if settings.plugin:
        env[PLUGIN_ENV] = json.dumps(settings.plugin, sort_keys=True)
    if pinned is not None:  # vLLM's CPU kernels lack the synthetic branch: the plugin adds it
        env[PIN_ENV] = f"{float(pinned):g}"
    return ServerLaunch(arm=arm, python=Path(python), args=tuple(args), env=env,
                        host=server.host, model=model, model_hash=model_hash,
                        api_key=server.api_key, build=build_info, kind=kind,
                        plugin=tree.describe())


def speculative_config(experiment: Experiment, name: str | None = None) -> dict[str, Any]:
    """The vLLM ``speculative_config`` of the profile ``name`` (None: the experiment's
    default speculator): as given, but a pinned profile runs vLLM's synthetic rejection
    sampling at that acceptance length (``rejection_sample_method = "synthetic"``,
    ``synthetic_acceptance_length``)."""
    name = name or experiment.default_speculator
    profile = dict(experiment.speculator(name))
    pin = profile.pop(PIN_KEY, None)
    if pin is None:
        return profile
    if not isinstance(pin, (int, float)) or isinstance(pin, bool):
        raise ConfigError(f"speculators.{name}.{PIN_KEY} = {pin!r} is not resolved to a "
                          "length yet (e2e sweep and e2e run resolve \"baseline\")")
    profile.update(rejection_sample_method="synthetic",
                   synthetic_acceptance_length=float(pin))
    return profile
