"""Benchmark of the task runtime (docs/benchmarks.md, "Task runtime"). Not a test.

1. Data: upload then download of ``--mib`` MiB, as ``--files`` files and as one file, to moto's S3
   server (started here on a free loopback port): the runtime's ``upload``/``download`` (with the
   manifest commit) against s3fs used directly (``fs.put``/``fs.get`` of the same lists, what
   ``aws s3 cp --recursive`` does). Each measured ``--repeat`` times, the two in turns, best kept;
   ratio = direct time / runtime time (1.0: as fast as the library alone).
2. Overhead: a task running ``true`` on the local backend, from ``create_pod`` to its phase read back as
   Succeeded, against ``true`` started directly with ``subprocess.run``.

    .venv/bin/python -m bench.runtime --mib 1024 --files 1000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _moto(port: int, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        process = subprocess.Popen([str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p",
                                    str(port)], stdout=out, stderr=subprocess.STDOUT)
    for _ in range(400):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1).close()
            return process
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("moto_server did not start")


def _make_files(folder: Path, total: int, count: int) -> None:
    folder.mkdir(parents=True)
    size = total // count
    block = os.urandom(min(size, 1 << 20))
    for index in range(count):
        with open(folder / f"part-{index:05d}.bin", "wb") as handle:
            left = size
            while left > 0:
                handle.write(block[:left])
                left -= len(block[:left])


def _best(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def _best_pair(first, second, repeat: int) -> tuple[float, float]:
    """Best of ``repeat`` for each, run in turns (first, second, first, ...): on a shared machine the load
    moves within a minute, and it then weighs on both alike instead of on whichever ran later."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for run, kept in ((first, times[0]), (second, times[1])):
            started = time.perf_counter()
            run()
            kept.append(time.perf_counter() - started)
    return min(times[0]), min(times[1])


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} ({os.cpu_count()} CPUs)"


def _data_case(fs, work: Path, total_mib: int, label: str, count: int, repeat: int) -> list[tuple[str, float, float]]:
    """One size and file count: direct and runtime upload, then download, best of ``repeat``."""
    from runtime.storage import download, upload

    src = work / f"src-{count}"
    _make_files(src, total_mib << 20, count)
    local = sorted(str(p) for p in src.iterdir())
    names = [Path(p).name for p in local]
    direct_prefix, runtime_url = f"bench-bucket/direct-{count}", f"s3://bench-bucket/runtime-{count}"

    def direct_up() -> None:
        fs.put(local, [f"{direct_prefix}/{name}" for name in names])

    def direct_down() -> None:
        dest = work / "direct-down"
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir()
        fs.invalidate_cache()
        fs.get([f"{direct_prefix}/{name}" for name in names], [str(dest / name) for name in names])

    def runtime_up() -> None:
        upload(str(src), runtime_url)

    def runtime_down() -> None:
        dest = work / "runtime-down"
        shutil.rmtree(dest, ignore_errors=True)
        download(runtime_url, str(dest), committed_only=True)

    up_direct, up_runtime = _best_pair(direct_up, runtime_up, repeat)
    down_direct, down_runtime = _best_pair(direct_down, runtime_down, repeat)
    shutil.rmtree(src)
    return [(f"upload {total_mib} MiB, {label}", up_direct, up_runtime),
            (f"download {total_mib} MiB, {label}", down_direct, down_runtime)]


def data_bench(total_mib: int, files: int, repeat: int, work: Path) -> list[tuple[str, float, float]]:
    import fsspec

    port = _free_port()
    moto = _moto(port, work / "moto.log")
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench-secret",
                       "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{port}", "AWS_DEFAULT_REGION": "us-east-1"})
    # moto completes a 1 GiB multipart upload (joining its parts) slower than s3fs's 15 s read timeout on
    # a loaded machine; the retry then finds the upload gone (HTTP 500). Both sides get a longer timeout
    # through fsspec's configuration, which the runtime's filesystem reads as well (so does FSSPEC_S3).
    fsspec.config.conf.setdefault("s3", {})["config_kwargs"] = {"read_timeout": 300}
    rows: list[tuple[str, float, float]] = []
    try:
        fs = fsspec.filesystem("s3", skip_instance_cache=True)
        fs.mkdir("bench-bucket")
        for label, count in ((f"{files} files", files), ("1 file", 1)):
            for row in _data_case(fs, work, total_mib, label, count, repeat):
                case, direct, ours = row
                print(f"{case:<34} {direct:>13.2f} {ours:>10.2f} {direct / ours:>6.2f}", flush=True)
                rows.append(row)
    finally:
        moto.terminate()
        moto.wait(timeout=30)
    return rows


def overhead_bench(repeat: int, work: Path) -> tuple[float, float]:
    from scheduler.dispatch.local import LocalBackend
    from scheduler.dispatch.pod.request import PodRequest

    backend = LocalBackend(work / "pods")
    direct = _best(lambda: subprocess.run(["true"], check=True), repeat)
    counter = iter(range(10**6))

    def one() -> None:
        pod = PodRequest(pod_name=f"true-{next(counter)}", namespace="bench", node_name="slot", workflow_id="w",
                         group="g", task="t", pool="bench", image="-", command=("true",))
        backend.create_pod(pod)
        while backend.pod_states([pod], now=datetime.now(tz=UTC))[pod.pod_name].phase not in ("Succeeded", "Failed"):
            time.sleep(0.005)
        assert backend.pod_states([pod], now=datetime.now(tz=UTC))[pod.pod_name].phase == "Succeeded"

    local = _best(one, repeat)
    return direct, local


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--overhead-only", action="store_true", help="only the `true` task through the local backend")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="osmo-bench-runtime-"))
    try:
        print(f"start: {_load()}", flush=True)
        if not options.overhead_only:
            print(f"{'case':<34} {'s3fs direct s':>13} {'runtime s':>10} {'ratio':>6}")
            data_bench(options.mib, options.files, options.repeat, work)
        direct, local = overhead_bench(max(options.repeat, 5), work)
        print(f"task `true`: direct {direct * 1000:.1f} ms, local backend (sandbox + runtime, create to "
              f"Succeeded) {local * 1000:.0f} ms, overhead {(local - direct) * 1000:.0f} ms")
        print(f"end: {_load()}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
