"""``e2e arms`` and ``e2e build``: what each arm runs, and its builds made ahead of time."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from e2e.commands._options import ConfigOpt
from e2e.config import load_experiment
from e2e.console import err, guard, out

__all__ = ["arms", "build"]


def arms(config: ConfigOpt = None) -> None:
    """List each arm of a config: its server build, environment and plugin settings."""

    def body() -> None:
        import json

        from e2e.arms import PLUGIN_ENV

        experiment = load_experiment(config)
        redactor = experiment.redactor()
        for name, arm in experiment.arms.items():
            build = arm.build or experiment.server.build
            out.print(f"[bold]{name}[/]  {arm.description}", highlight=False)
            source = (f"python {build.python}" if build.python
                      else f"managed env: {' '.join(build.requirements)}")
            out.print(f"  build:   {redactor.text(source)}", highlight=False)
            env = redactor.env({**experiment.server.env, **arm.env})
            if arm.plugin:
                env[PLUGIN_ENV] = json.dumps(arm.plugin, sort_keys=True)
            out.print(f"  env:     {env}", highlight=False)
            out.print(f"  args:    {redactor.argv([*experiment.server.args, *arm.args])}",
                      highlight=False)
            out.print(f"  plugin:  {redactor.config(arm.plugin) or '(none)'}", highlight=False)

    guard(body)


def build(
    arm: Annotated[Optional[str], typer.Option(help="Only this arm's build.")] = None,
    config: ConfigOpt = None,
) -> None:
    """Prepare server builds (managed environments) and the model ahead of time."""

    def body() -> None:
        from e2e.session import resolve_python
        from e2e.session import resolve_model

        experiment = load_experiment(config)
        names = [arm] if arm else list(experiment.arms)
        for name in names:
            settings = experiment.arm(name)
            python = resolve_python(settings.build or experiment.server.build,
                                    progress=lambda s: err.print(f"[dim]{s}[/]"))
            out.print(f"{name}: {python}", highlight=False)
        model, digest = resolve_model(experiment.server.model)
        out.print(f"model: {model}" + (f" (sha256 {digest[:12]})" if digest else ""),
                  highlight=False)

    guard(body)

