"""A scripted stand-in for a server, for the session's fault and GSM8K tests: no process, a
log that says (or does not say) that e2e's plugin applied the arm's settings, and /metrics
text whose spec-decode counters move by a fixed step per scrape."""

from __future__ import annotations

import contextlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from e2e.arms import ServerLaunch
from e2e.session import Servers


def applied_line(arm: str, settings: dict) -> str:
    return (f"e2e-plugin: applied in worker (pid 4242, FakeModelRunner): arm={arm} mode=inject "
            f"packing={settings.get('packing')} | settings={json.dumps(settings, sort_keys=True)}")


@dataclass
class Scripted:
    """``servers`` goes into ``SessionOptions``; ``applies`` False makes every server's worker
    skip the plugin (the log has no applied line)."""

    applies: bool = True
    model: str = "tiny"  # a local model folder where the workload draws prompts from it
    served: list[tuple[str, bool]] = field(default_factory=list)
    stopped: int = 0
    drafts: float = 0.0

    def launch(self, experiment, arm, *, dspark, progress=None, **kwargs) -> ServerLaunch:
        settings = experiment.arm(arm).plugin
        env = {"E2E_ARM": arm}
        if settings:
            env["E2E_PLUGIN_SETTINGS"] = json.dumps(settings, sort_keys=True)
        args = ("--model", "tiny") + (("--speculative-config", "{}") if dspark else ())
        return ServerLaunch(arm=arm, python=Path(sys.executable), args=args, env=env,
                            model=self.model, build={"kind": "python"},
                            api_key=experiment.server.api_key)

    @contextlib.contextmanager
    def serve(self, launch: ServerLaunch, log_path: Path, options):
        self.served.append((launch.arm, "--speculative-config" in launch.args))
        settings = json.loads(launch.env.get("E2E_PLUGIN_SETTINGS", "{}"))
        lines = [f"fake server for {launch.arm}"]
        if self.applies and settings:
            lines.append(applied_line(launch.arm, settings))
        Path(log_path).write_text("\n".join(lines) + "\n")
        fake = self

        class Handle:
            base_url = f"http://127.0.0.1:{9000 + len(fake.served)}"
            model = fake.model
            argv = ["python", "-m", "fake", "--port", str(9000 + len(fake.served))]

            def __init__(self):
                self.log_path = Path(log_path)

            def headers(self):
                return {}

            def alive(self):
                return True

            def scrape_metrics(self):
                fake.drafts += 10
                d = fake.drafts
                return (f"vllm:spec_decode_num_drafts_total {d}\n"
                        f"vllm:spec_decode_num_accepted_tokens_total {d * 0.8}\n"
                        f"vllm:spec_decode_num_draft_tokens_total {d * 3}\n")

        try:
            yield Handle()
        finally:
            self.stopped += 1

    @property
    def servers(self) -> Servers:
        return Servers(launch=self.launch, serve=self.serve)
