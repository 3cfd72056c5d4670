"""``e2e arms`` and ``e2e build``: what each arm runs, and its builds made ahead of time."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from e2e.commands._options import ConfigOpt, QuietOpt
from e2e.config import load_experiment
from e2e.console import guard, out, say

__all__ = ["arms", "build"]


def arms(config: ConfigOpt = None) -> None:
    """Show what each arm of a config runs, as a config that loads back: its build, the
    environment and arguments its server gets and its plugin settings, secrets redacted; the
    facts (a git ref's commit, a wheel's sha256, the managed environment) as comments."""

    def body() -> None:
        from e2e.execute import describe_arms
        from e2e.render import toml_text

        document, comments = describe_arms(load_experiment(config))
        out.print(toml_text(document, comments=comments), end="", highlight=False,
                  markup=False, soft_wrap=True)

    guard(body)


def build(
    arm: Annotated[Optional[str], typer.Option(help="Only this arm's build.")] = None,
    config: ConfigOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Prepare server builds (managed environments) and the model ahead of time."""

    def body() -> None:
        from e2e.session import resolve_python
        from e2e.session import resolve_model

        experiment = load_experiment(config)
        names = [arm] if arm else list(experiment.arms)
        for name in names:
            python = resolve_python(experiment.build_of(name),
                                    progress=(lambda s: None) if quiet else say)
            out.print(f"{name}: {python}", highlight=False)
        model, digest = resolve_model(experiment.server.model)
        out.print(f"model: {model}" + (f" (sha256 {digest[:12]})" if digest else ""),
                  highlight=False)

    guard(body)

