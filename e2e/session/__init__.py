"""The server session: the one place a unit of work meets a server (fresh, or external with
``--base-url``), with the arm's build, the plugin check and the run's provenance.
"""

from e2e.session._bounds import check_units
from e2e.session._builds import describe_source, prepare, python_path, resolve_git, resolve_python
from e2e.session._launch import server_launch, speculative_config
from e2e.session._plugin_check import plugin_check
from e2e.session._provenance import provenance, source_facts
from e2e.session._duet import run_duet
from e2e.session._session import Servers, SessionOptions, run_unit
from e2e.session._shield import shielded
from e2e.session._workloads import Workloads
from e2e.session._tinymodel import model_path, resolve_model

__all__ = [
    "Servers", "SessionOptions", "Workloads", "check_units", "describe_source", "model_path",
    "plugin_check", "prepare",
    "provenance", "python_path", "resolve_git", "resolve_model", "resolve_python", "run_duet", "run_unit",
    "server_launch", "shielded", "source_facts", "speculative_config"
]
