"""The command's environment and the launchers of the runtime image (docs/runtime.md, "The command's
environment", "The osmo command in a task").

The Kubernetes launchers run here on a folder laid out as the runtime image's ``/opt/osmo-runtime``:
``python`` is this interpreter's installation, ``lib`` the virtualenv's packages, ``app`` the project's
``runtime``, ``cli`` and ``parsing``. What the image installs into ``lib`` (the Dockerfile's
``RUNTIME_PACKAGES``) is checked against what the runtime and the CLI import."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from runtime.environment import CLI_DIR_ENV, DEFAULT_PATH, OWN_ENV, SAVED_PREFIX, command_env

ROOT = Path(__file__).resolve().parents[2]
LAUNCHERS = ROOT / "runtime" / "launchers"


def test_the_launcher_s_variables_get_their_earlier_values_back():
    # given the runtime's environment as a launcher left it: PYTHONPATH was set before, PYTHONHOME not
    environ = {"PATH": "/usr/bin", "PYTHONPATH": "/osmo/bin/lib", "PYTHONHOME": "/osmo/bin/python",
               "LD_LIBRARY_PATH": "/osmo/bin/python/lib", OWN_ENV: "PYTHONHOME,PYTHONPATH,LD_LIBRARY_PATH",
               f"{SAVED_PREFIX}PYTHONPATH": "/workspace/src", "HOME": "/root"}

    # when
    env = command_env(environ, {"EPOCHS": "3"})

    # then the command sees the container's values, none of the bookkeeping, and the plan's variables
    assert env == {"PATH": "/usr/bin", "PYTHONPATH": "/workspace/src", "HOME": "/root", "EPOCHS": "3"}


def test_the_plan_s_variables_win_and_without_a_launcher_nothing_is_dropped():
    environ = {"PATH": "/usr/bin", "PYTHONPATH": "/mine"}
    assert command_env(environ, {"PYTHONPATH": "/plan"}) == {"PATH": "/usr/bin", "PYTHONPATH": "/plan"}
    assert command_env(environ, {}) == environ


def test_the_cli_folder_goes_last_on_the_path_once_and_only_when_it_exists(tmp_path):
    # given a CLI folder, and one that does not exist
    folder = tmp_path / "cli"
    folder.mkdir()

    # then
    assert command_env({"PATH": "/usr/bin", CLI_DIR_ENV: str(folder)}, {})["PATH"] == f"/usr/bin:{folder}"
    assert command_env({"PATH": f"/usr/bin:{folder}", CLI_DIR_ENV: str(folder)}, {})["PATH"] == f"/usr/bin:{folder}"
    assert command_env({CLI_DIR_ENV: str(folder)}, {})["PATH"] == f"{DEFAULT_PATH}:{folder}"
    assert command_env({"PATH": "/usr/bin", CLI_DIR_ENV: str(tmp_path / "none")}, {})["PATH"] == "/usr/bin"
    # a PATH the plan sets still gets the CLI at its end
    planned = command_env({"PATH": "/usr/bin", CLI_DIR_ENV: str(folder)}, {"PATH": "/opt/bin"})
    assert planned["PATH"] == f"/opt/bin:{folder}"


@pytest.fixture
def image_folder(tmp_path) -> Path:
    """A folder laid out as the runtime image's /opt/osmo-runtime (see the module docstring)."""
    here = tmp_path / "osmo-bin"
    (here / "cli").mkdir(parents=True)
    (here / "app").mkdir()
    (here / "python").symlink_to(sys.base_prefix)
    (here / "lib").symlink_to(sysconfig.get_paths()["purelib"])
    for package in ("runtime", "cli", "parsing"):
        (here / "app" / package).symlink_to(ROOT / package)
    (here / "osmo-runtime").write_bytes((LAUNCHERS / "osmo-runtime").read_bytes())
    (here / "cli" / "osmo").write_bytes((LAUNCHERS / "osmo").read_bytes())
    for launcher in (here / "osmo-runtime", here / "cli" / "osmo"):
        launcher.chmod(0o755)
    return here


def test_the_kubernetes_launcher_runs_the_runtime_and_the_command_gets_the_container_s_environment(
        image_folder, tmp_path):
    # given a container whose image sets PYTHONPATH and no PYTHONHOME, and a plan printing the command's view
    script = ('echo "PYTHONPATH=${PYTHONPATH-unset} PYTHONHOME=${PYTHONHOME-unset} '
              'LD_LIBRARY_PATH=${LD_LIBRARY_PATH-unset}"; echo "PATH=$PATH"; osmo --help | grep -m 1 -o "Usage: osmo"')
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"command": ["/bin/sh", "-c", script], "output_dir": str(tmp_path / "out"),
                                "input_dir": str(tmp_path / "in")}))
    container = {"PATH": "/usr/bin:/bin", "PYTHONPATH": "/workspace/src", "OSMO_RESULT_PATH": str(tmp_path / "r.json")}

    # when the pod's container runs the launcher
    done = subprocess.run([str(image_folder / "osmo-runtime"), str(plan)], env=container, capture_output=True,
                          text=True, timeout=120)

    # then the runtime ran the command with the container's variables, and `osmo` was the CLI's
    assert done.returncode == 0, done.stderr + done.stdout
    lines = [line for line in done.stdout.splitlines() if not line.startswith("[osmo]")]
    assert lines[0] == "PYTHONPATH=/workspace/src PYTHONHOME=unset LD_LIBRARY_PATH=unset"
    assert lines[1] == f"PATH=/usr/bin:/bin:{image_folder}/cli"
    assert lines[2] == "Usage: osmo"
    assert json.loads((tmp_path / "r.json").read_text())["exit_code"] == 0


def _runtime_package_names() -> list[str]:
    """RUNTIME_PACKAGES as the Dockerfile writes them (its RUN greps ``^<name>==`` in requirements.txt)."""
    text = (ROOT / "Dockerfile").read_text()
    found = re.search(r'ARG RUNTIME_PACKAGES="([^"]*)"', text)
    assert found, "the Dockerfile's runtime stage lists RUNTIME_PACKAGES"
    return found.group(1).replace("\\\n", " ").split()


def _runtime_packages() -> set[str]:
    return {_normal(name) for name in _runtime_package_names()}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_runtime_image_installs_what_the_runtime_and_the_cli_import():
    # given what importing the runtime, its storage and the CLI loads from installed distributions, and
    # what those distributions require (extras aside)
    code = """
import importlib.metadata as md, json, re, sys
import cli.main, runtime.run, runtime.storage, runtime.barrier, fsspec.implementations.local
dists = md.packages_distributions()
found = {d for name, module in list(sys.modules.items()) if 'site-packages' in (getattr(module, '__file__', '') or '')
         for d in dists.get(name.split('.')[0], [])}
from packaging.requirements import Requirement  # after the count: only this check imports it
found -= {'osmo-workflows', 'setuptools'}
stack, seen = list(found), set()
while stack:
    name = stack.pop()
    key = re.sub(r'[-_.]+', '-', name).lower()
    if key in seen:
        continue
    seen.add(key)
    for text in md.requires(name) or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({'extra': ''}):
            stack.append(req.name)
print(json.dumps(sorted(seen)))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    needed = {_normal(name) for name in json.loads(done.stdout)}

    # then the image installs each of them, and each is pinned in requirements.txt
    pinned = {_normal(line.split("==")[0]) for line in (ROOT / "requirements.txt").read_text().splitlines()
              if "==" in line and not line.startswith("#")}
    assert {"httpx", "typer", "fsspec", "pyyaml"} <= needed
    assert needed - _runtime_packages() == set()
    assert _runtime_packages() - pinned == set()
    # spelt as requirements.txt spells them: the image's grep is case-sensitive
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    assert [name for name in _runtime_package_names() if not any(line.startswith(f"{name}==") for line in lines)] == []
