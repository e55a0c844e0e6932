"""Fixtures for the runtime tests: moto's standalone S3 server on a free loopback port, and a helper that
runs the runtime as a real process (``python -m runtime``). Pure: no database."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

MOTO_SECRET = "moto-secret-value-0123456789"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class S3Server:
    endpoint: str

    @property
    def env(self) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": "moto-access-key", "AWS_SECRET_ACCESS_KEY": MOTO_SECRET,
                "AWS_ENDPOINT_URL_S3": self.endpoint, "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """moto's standalone S3 server (a real HTTP S3 API), started once per session."""
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1",
                                    "-p", str(port)], stdout=out, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
            break
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"moto_server exited: {log.read_text()}") from None
            time.sleep(0.05)
    yield S3Server(endpoint)
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture
def s3(s3_server, monkeypatch):
    """The S3 server's credentials in this process's environment; a filesystem to prepare data with."""
    for name, value in s3_server.env.items():
        monkeypatch.setenv(name, value)
    import fsspec

    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    return fs


@pytest.fixture
def bucket(s3, request):
    name = "b-" + request.node.name.lower().replace("_", "-")[:40].strip("-")
    s3.mkdir(name)
    return name


@dataclass(frozen=True)
class Ran:
    returncode: int
    result: dict
    stdout: str
    stderr: str


def run_runtime(plan: dict, workdir: Path, *, env: dict[str, str] | None = None, timeout: float = 60) -> Ran:
    """Run ``python -m runtime plan.json`` as a real process; its result file read back."""
    plan_path = workdir / "plan.json"
    plan_path.write_text(json.dumps(plan))
    result_path = workdir / "result.json"
    completed = subprocess.run([sys.executable, "-m", "runtime", str(plan_path), "--result", str(result_path)],
                               env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout)
    result = json.loads(result_path.read_text()) if result_path.exists() else {}
    return Ran(completed.returncode, result, completed.stdout, completed.stderr)


@dataclass(frozen=True)
class DeniedS3:
    """An S3 server that enforces IAM, a bucket with one object, and the keys of a user with no policy."""

    endpoint: str
    bucket: str
    env: dict[str, str]
    secret: str


@pytest.fixture(scope="session")
def denied_s3(tmp_path_factory):
    """A second moto server that authenticates every request after the first four (the set-up: bucket,
    object, user, access key), so the user's requests are refused as on a real account."""
    import boto3

    port = free_port()
    log = tmp_path_factory.mktemp("moto-iam") / "moto.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1",
                                    "-p", str(port)], stdout=out, stderr=subprocess.STDOUT,
                                   env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "4"})
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            time.sleep(0.05)
    admin = {"endpoint_url": endpoint, "region_name": "us-east-1", "aws_access_key_id": "AKIAIOSFODNN7EXAMPLE",
             "aws_secret_access_key": "x" * 40}
    s3, iam = boto3.client("s3", **admin), boto3.client("iam", **admin)
    s3.create_bucket(Bucket="denied-bucket")
    s3.put_object(Bucket="denied-bucket", Key="data/x.txt", Body=b"x")
    iam.create_user(UserName="no-policy")
    key = iam.create_access_key(UserName="no-policy")["AccessKey"]
    yield DeniedS3(endpoint, "denied-bucket", {"AWS_ACCESS_KEY_ID": key["AccessKeyId"],
                                               "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
                                               "AWS_ENDPOINT_URL_S3": endpoint, "AWS_DEFAULT_REGION": "us-east-1"},
                   key["SecretAccessKey"])
    process.terminate()
    process.wait(timeout=10)
