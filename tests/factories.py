"""Builders for database rows used across the Django tests."""

from __future__ import annotations

from pathlib import Path

from django.core.management import call_command

from credentials.tokens import api_key_create
from scheduler.models import Node, Pool, TopologyKey

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
GiB = 2**30
TiB = 2**40

NVL72_KEYS = [
    ("zone", "topology.kubernetes.io/zone"),
    ("spine", "topology.kubernetes.io/spine"),
    ("rack", "topology.kubernetes.io/rack"),
    ("gpu-clique", "nvidia.com/gpu-clique"),
]


def make_api_key(user) -> str:
    """A new API key of ``user`` (replacing the one it has): the key, as ``drf_create_token`` prints it."""
    return api_key_create(user=user, replace=True)


def make_pool(name: str = "test", keys: list[tuple[str, str]] | None = None, **fields) -> Pool:
    pool = Pool.objects.create(name=name, **fields)
    for position, (key, label) in enumerate(keys if keys is not None else NVL72_KEYS):
        TopologyKey.objects.create(pool=pool, key=key, label=label, position=position)
    return pool


def make_node(pool: Pool, name: str, labels: dict[str, str], *, gpu: int = 4, cpu: int = 144, memory_gib: int = 960,
              storage_tib: int = 4, used_gpu: int = 0, schedulable: bool = True) -> Node:
    return Node.objects.create(pool=pool, name=name, labels=labels, gpu=gpu, cpu_millis=cpu * 1000,
                               memory_bytes=memory_gib * GiB, storage_bytes=storage_tib * TiB, used_gpu=used_gpu,
                               schedulable=schedulable)


def make_nvl72_pool(name: str = "nvl72", *, zones: int = 2, spines: int = 1, racks: int = 2, nodes: int = 18,
                    gpu: int = 4, **fields) -> Pool:
    """zones x spines x racks, each rack one gpu-clique of ``nodes`` nodes with ``gpu`` GPUs."""
    pool = make_pool(name, NVL72_KEYS, **fields)
    batch = []
    for z in range(1, zones + 1):
        for s in range(1, spines + 1):
            for r in range(1, racks + 1):
                rack = f"z{z}-s{s}-r{r}"
                for n in range(1, nodes + 1):
                    batch.append(Node(
                        pool=pool, name=f"{rack}-n{n:02d}",
                        labels={"topology.kubernetes.io/zone": f"z{z}", "topology.kubernetes.io/spine": f"s{s}",
                                "topology.kubernetes.io/rack": f"r{r}", "nvidia.com/gpu-clique": f"{rack}"},
                        gpu=gpu, cpu_millis=144_000, memory_bytes=960 * GiB, storage_bytes=4 * TiB,
                    ))
    Node.objects.bulk_create(batch)
    return pool


def import_example_pool(filename: str = "nvl72.yaml") -> Pool:
    call_command("import_pool", str(EXAMPLES / "pools" / filename), verbosity=0)
    import yaml

    name = yaml.safe_load((EXAMPLES / "pools" / filename).read_text())["pool"]["name"]
    return Pool.objects.get(name=name)


def example_spec(name: str) -> str:
    return (EXAMPLES / f"{name}.yaml").read_text()


SEED_EXAMPLES = [
    "single-nvl72-rack",
    "multiple-nvl72-racks",
    "multiple-nvl72-same-zone",
    "best-effort-topology",
    "scoped-group-example",
]


#: An app's spec template (tests of apps): three parameters, two of them documented by comments.
HELLO_APP_SPEC = """\
workflow:
  name: {{ workflow_name }}
  tasks:
  - name: main
    image: {{ image }}
    command: [sh, -c, "echo {{ message }}"]
default-values:
  workflow_name: hello   # Name of the workflow
  # The image the task runs
  image: busybox
  message: hi
"""
