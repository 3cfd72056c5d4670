"""The server session: the one place a unit of work meets a server (fresh, or external with
``--base-url``), with the arm's build, the plugin check and the run's provenance.
"""

from e2e.session.bounds import check_units, model_context
from e2e.session.builds import (describe_source, managed_env_dir, prepare, project_root,
                                 python_path, resolve_git, resolve_python)
from e2e.session.external import ExternalServer, parse_base_url
from e2e.session.launch import server_launch, speculative_config
from e2e.session.plugin_log import applied_fields, check_plugin, plugin_check
from e2e.session.plugin_copy import SERVER_ENV, plugin_tree, server_pythonpath
from e2e.session._provenance import provenance, source_facts
from e2e.session.duet import run_duet, shared_cores
from e2e.session.session import Servers, SessionOptions, redacted_config, run_unit
from e2e.session.server import free_port, group_alive, serve, server_lock, start, stop_group
from e2e.session._shield import shielded
from e2e.session._workloads import Workloads
from e2e.session.tinymodel import build_tiny_llama, model_path, resolve_model

__all__ = [
    "ExternalServer", "SERVER_ENV", "Servers", "SessionOptions", "Workloads", "applied_fields",
    "build_tiny_llama", "check_plugin", "check_units", "describe_source", "free_port",
    "group_alive", "managed_env_dir", "model_context", "model_path", "parse_base_url",
    "plugin_check", "plugin_tree", "prepare", "project_root", "provenance", "python_path",
    "redacted_config", "resolve_git", "resolve_model", "resolve_python", "run_duet", "run_unit",
    "serve", "server_launch", "server_lock", "server_pythonpath", "shared_cores", "shielded",
    "source_facts", "speculative_config", "start", "stop_group"
]
