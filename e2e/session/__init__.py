"""The server session: the one place a unit of work meets a server (fresh, or external with
``--base-url``), with the arm's build, the plugin check and the run's provenance.
"""

from e2e.session.bounds import check_units
from e2e.session.builds import describe_source, resolve_git, resolve_python
from e2e.session.launch import server_launch
from e2e.session.plugin_log import plugin_check
from e2e.session._provenance import provenance, source_facts
from e2e.session.duet import run_duet
from e2e.session.session import Servers, SessionOptions, run_unit
from e2e.session._shield import shielded
from e2e.session._workloads import Workloads
from e2e.session.tinymodel import resolve_model

__all__ = [
    "Servers", "SessionOptions", "Workloads", "check_units", "describe_source", "plugin_check",
    "provenance", "resolve_git", "resolve_model", "resolve_python", "run_duet", "run_unit",
    "server_launch", "shielded", "source_facts"
]
