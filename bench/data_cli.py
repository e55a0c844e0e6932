"""Benchmark of ``osmo data upload`` (docs/benchmarks.md, "osmo data"). Not a test.

``--files`` small files (``--kib`` KiB each) uploaded to moto's standalone S3 server, as two fresh processes
taken in turns, best of ``--repeat`` each:

- baseline, fsspec alone: ``python -c`` importing fsspec and s3fs, one ``fs.put`` of the file list with the
  credential in the environment (what a script using the library directly does);
- ``osmo data upload s3://bench-bucket/... FOLDER/*``: the installed CLI, which fetches the user's data
  credential from a running service (the embedded default: SQLite, started here on a free port) and goes
  through the runtime's storage layer.

ratio = baseline time / CLI time (1.0: as fast as fsspec alone; the goal is at least 0.8).

    .venv/bin/python -m bench.data_cli --files 1000 --kib 4 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.runtime import _free_port, _load, _moto

ROOT = Path(__file__).resolve().parents[1]
BASELINE = """
import sys, fsspec
src, prefix, names = sys.argv[1], sys.argv[2], sys.argv[3:]
fs = fsspec.filesystem("s3")
fs.put([f"{src}/{n}" for n in names], [f"{prefix}/{n}" for n in names])
"""
SETUP = """
from django.contrib.auth.models import User
from credentials.services import credential_set
from credentials.tokens import api_key_create
user = User.objects.create_user("bench")
credential_set(owner=user, name="moto", kind="data", values={{"endpoint": "s3://bench-bucket",
    "access_key_id": "bench", "access_key": "bench-secret-value", "region": "us-east-1", "override_url": "{endpoint}"}})
print(api_key_create(user=user, replace=True))
"""


def _service(port: int, data: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The embedded default on ``port``, migrated, with a user holding a data credential for moto: its API key."""
    env = {**os.environ, "OSMO_DATA_DIR": str(data), "PYTHONPATH": str(ROOT)}
    for name in ("DATABASE_URL", "REDIS_URL"):
        env.pop(name, None)
    subprocess.run([sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"], cwd=ROOT, env=env, check=True)
    endpoint = os.environ["BENCH_S3_ENDPOINT"]
    key = subprocess.run([sys.executable, "manage.py", "shell", "-c", SETUP.format(endpoint=endpoint)], cwd=ROOT,
                         env=env, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    with open(log, "wb") as out:
        server = subprocess.Popen([sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
                                  cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    for _ in range(400):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).close()
            return server, key
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"the service did not start: {log.read_text()[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--kib", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="osmo-bench-data-"))
    moto_port, service_port = _free_port(), _free_port()
    moto = _moto(moto_port, work / "moto.log")
    endpoint = f"http://127.0.0.1:{moto_port}"
    os.environ["BENCH_S3_ENDPOINT"] = endpoint
    server = None
    try:
        print(f"start: {_load()}", flush=True)
        server, key = _service(service_port, work / "data", work / "service.log")
        src = work / "src"
        src.mkdir()
        block = os.urandom(options.kib << 10)
        names = [f"part-{index:05d}.bin" for index in range(options.files)]
        for name in names:
            (src / name).write_bytes(block)
        s3_env = {**os.environ, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench-secret-value",
                  "AWS_ENDPOINT_URL_S3": endpoint, "AWS_DEFAULT_REGION": "us-east-1"}
        subprocess.run([sys.executable, "-c", "import fsspec; fsspec.filesystem('s3').mkdir('bench-bucket')"],
                       env=s3_env, check=True)
        cli_env = {**os.environ, "OSMO_URL": f"http://127.0.0.1:{service_port}", "OSMO_TOKEN": key,
                   "OSMO_CONFIG": str(work / "config.json"), "PYTHONPATH": str(ROOT)}
        osmo = str(Path(sys.executable).with_name("osmo"))
        counter = iter(range(10**6))
        times: tuple[list[float], list[float]] = ([], [])
        for _ in range(options.repeat):
            run = next(counter)
            for index, command, env in (
                    (0, [sys.executable, "-c", BASELINE, str(src), f"bench-bucket/direct-{run}", *names], s3_env),
                    (1, [osmo, "data", "upload", f"s3://bench-bucket/cli-{run}", f"{src}/*"], cli_env)):
                started = time.perf_counter()
                subprocess.run(command, env=env, check=True, capture_output=True)
                times[index].append(time.perf_counter() - started)
        direct, cli = min(times[0]), min(times[1])
        print(f"{options.files} files of {options.kib} KiB: fsspec alone {direct:.2f} s, osmo data upload {cli:.2f} s, "
              f"ratio {direct / cli:.2f} (all runs: fsspec {', '.join(f'{t:.2f}' for t in times[0])}; "
              f"osmo {', '.join(f'{t:.2f}' for t in times[1])})", flush=True)
        print(f"end: {_load()}")
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        moto.terminate()
        moto.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
