"""The environment the task's command runs with (docs/runtime.md, "The command's environment").

The runtime's launcher sets variables for the runtime's own interpreter: on Kubernetes the interpreter
copied into the pod needs ``PYTHONHOME``, ``PYTHONPATH`` and ``LD_LIBRARY_PATH`` pointing at its folder;
the local backend puts the service's packages on ``PYTHONPATH``. Those values are the runtime's, not the
task's: a user's image with its own Python would start with another interpreter's standard library. So
a launcher names the variables it set in ``OSMO_RUNTIME_OWN_ENV`` (comma-separated) and keeps the value
each had before in ``OSMO_RUNTIME_SAVED_<name>`` (absent when it was not set); the command gets those
values back and none of the bookkeeping.

``OSMO_CLI_DIR``, when the backend sets it to a folder, holds the ``osmo`` command (the service's CLI,
logged in as the task's submitter through ``OSMO_URL`` and ``OSMO_TOKEN``): it is put at the end of the
command's ``PATH``, so a program of the same name in the user's image comes first.

Pure: no Django, no project code.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

OWN_ENV = "OSMO_RUNTIME_OWN_ENV"
SAVED_PREFIX = "OSMO_RUNTIME_SAVED_"
CLI_DIR_ENV = "OSMO_CLI_DIR"
#: The ``PATH`` of a shell that has none (Debian's default for login shells).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def command_env(environ: Mapping[str, str], plan_env: Mapping[str, str]) -> dict[str, str]:
    """The command's environment: the runtime's own (``environ``) with the launcher's variables given
    back their earlier values, then the plan's variables on top, then the CLI's folder at the end of
    ``PATH`` (when it is a folder)."""
    env = dict(environ)
    for name in filter(None, env.pop(OWN_ENV, "").split(",")):
        env.pop(name, None)
        saved = env.pop(SAVED_PREFIX + name, None)
        if saved is not None:
            env[name] = saved
    for name in [name for name in env if name.startswith(SAVED_PREFIX)]:
        del env[name]
    env.update(plan_env)
    cli_dir = env.get(CLI_DIR_ENV, "")
    if cli_dir and os.path.isdir(cli_dir):
        path = env.get("PATH") or DEFAULT_PATH
        if cli_dir not in path.split(os.pathsep):
            env["PATH"] = f"{path}{os.pathsep}{cli_dir}"
    return env
