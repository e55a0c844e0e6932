"""API fuzzing: "no 5xx for any input" and the error envelope (docs/design.md §7), against a running server.

Two parts, both only ever sending to the URL given (use a throwaway server on loopback):

1. Hand-made odd inputs that schemathesis does not generate: ``POST /api/workflows/`` with specs
   holding NUL characters, lone surrogates, huge YAML integers, tags, anchors, merge keys, deep nesting,
   raw YAML bodies; pool imports with malformed inventory documents; NUL characters in URL paths.
   A response fails when it is a 5xx, or a 4xx that is not ``{"code", "message", "details"}`` (with
   ``details.errors: [{"path", "message"}]`` for validation errors).
2. With ``--schemathesis``: the schemathesis CLI over ``/api/schema/``, once as the normal user with
   ``not_a_server_error`` and once as staff with every check (writes happen: use a throwaway database).

Run it against PostgreSQL (NUL characters and column lengths only fail there), e.g. in one shell::

    OSMO_NEED_CHROMIUM=0 bash -c 'source scripts/services.sh; services_start; \
        export DJANGO_SETTINGS_MODULE=osmo.settings.local; .venv/bin/python manage.py migrate -v0; \
        .venv/bin/python manage.py osmo_bootstrap; \
        .venv/bin/python manage.py runserver 127.0.0.1:8125 --noreload'

then, with the admin token it printed and a token of a non-staff user (``manage.py drf_create_token``)::

    .venv/bin/python -m bench.fuzz_api --url http://127.0.0.1:8125 --staff-token ADMIN --user-token USER \
        [--schemathesis --max-examples 50]

The schemathesis runs it makes are exactly::

    schemathesis run URL/api/schema/ -H "Authorization: Token USER" --checks not_a_server_error \
        --max-examples 50 --seed 1
    schemathesis run URL/api/schema/ -H "Authorization: Token ADMIN" --checks all --max-examples 50 --seed 1

Needs ``pip install schemathesis`` (not a project requirement). Exit status 1 when any probe failed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import requests

TASK = {"name": "t1", "image": "img", "command": ["run"], "resource": "r"}
RESOURCES = {"r": {"gpu": 1, "cpu": 1, "memory": "1Gi", "storage": "1Gi"}}
YAML_OK = b"workflow:\n  name: wf\n  tasks:\n  - {name: t1, image: img, command: [run]}\n"
HUGE_HEX = "0x" + "f" * 5000


def spec_with(**task: Any) -> dict[str, Any]:
    return {"workflow": {"name": "wf", "tasks": [{**TASK, **task}]}, "resources": RESOURCES}


def workflow_specs() -> dict[str, Any]:
    good = spec_with()
    return {
        "good": good, "plain string": "hello", "integer": 5, "list": [1], "null": None,
        "huge int": 10**400, "unicode": "ワークフロー: ☃",
        "image 600 chars": spec_with(image="x" * 600), "image NUL": spec_with(image="a\x00b"),
        "command NUL": spec_with(command=["a\x00"]), "env value NUL": spec_with(environment={"A": "\x00"}),
        "env name NUL": spec_with(environment={"A\x00": "x"}), "image lone surrogate": spec_with(image="\ud800"),
        "label NUL": {**good, "workflow": {**good["workflow"], "labels": {"k": "\x00"}}},
        "gpu 10**30": {**good, "resources": {"r": {"gpu": 10**30}}},
        "nodesExcluded NUL": {**good, "resources": {"r": {"gpu": 1, "nodesExcluded": ["\x00"]}}},
        "topology group NUL": {**good, "resources": {"r": {"gpu": 1, "topology": [{"key": "rack", "group": "\x00"}]}}},
        "deep list": json.loads("[" * 500 + "]" * 500),
        "deep mapping": {"workflow": json.loads('{"a":' * 300 + "1" + "}" * 300)},
        "yaml python tag": "workflow: !!python/object:os.system x",
        "yaml binary tag": "workflow: !!binary aGVsbG8=",
        "yaml alias bomb": "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(9)),
        "yaml merge key": "base: &b {name: wf}\nworkflow:\n  <<: *b\n  tasks: []",
        "yaml bad merge": "workflow:\n  <<: 5\n",
        "yaml duplicate key": "workflow: {}\nworkflow: {}",
        "yaml \\0 escape": 'workflow: {name: wf, tasks: [{name: t1, image: "a\\0b", command: [run]}]}',
        "yaml surrogate escape": (
            'workflow: {name: wf, labels: {a: "\\ud800"}, tasks: [{name: t1, image: a, command: [run]}]}'
        ),
        "yaml complex key": "? [a, b]\n: 1\nworkflow: {}",
        "yaml .inf": "workflow: {name: wf, timeout: {queue_timeout: .inf}}",
        "yaml huge hex": f"resources: {{r: {{gpu: {HUGE_HEX}}}}}\nworkflow: {{name: wf}}",
        "yaml huge octal version": "version: 0o" + "7" * 6000 + "\nworkflow: {name: wf}",
        "yaml multi document": "workflow: {}\n---\nworkflow: {}",
        "yaml deep flow": "[" * 10000 + "]" * 10000,
        "yaml deep block (over upload limit)": "".join(" " * i + "a:\n" for i in range(3000)),
        "empty": "",
    }


def inventories() -> dict[str, Any]:
    node = {"name": "n1", "labels": {"topology.kubernetes.io/zone": "z1"}, "capacity": {"gpu": 8}}

    def inv(pool: Any = None, **extra: Any) -> dict[str, Any]:
        return {"pool": pool if pool is not None else {"name": "fuzzpool"}, **extra}

    return {
        "list": [1], "string": "x", "pool string": inv("x"), "pool name NUL": inv({"name": "a\x00"}),
        "description NUL": inv({"name": "fuzzpool", "description": "a\x00b"}),
        "description surrogate": inv({"name": "fuzzpool", "description": "\ud800"}),
        "namespace NUL": inv({"name": "fuzzpool", "k8s_namespace": "\x00"}),
        "selector surrogate": inv({"name": "fuzzpool", "k8s_node_selector": "\udfff"}),
        "backend list": inv({"name": "fuzzpool", "backend": []}),
        "sim 1e300": inv({"name": "fuzzpool", "sim_task_seconds": 1e300}),
        "keys mapping": inv(topology_keys={"a": 1}), "keys strings": inv(topology_keys=["zone"]),
        "keys unhashable label": inv(topology_keys=[{"key": "z", "label": {"a": 1}}]),
        "nodes mapping": inv(nodes={"a": 1}), "node null": inv(nodes=[None]), "node twice": inv(nodes=[node, node]),
        "node name list": inv(nodes=[{**node, "name": ["n"]}]),
        "label value NUL": inv(nodes=[{**node, "labels": {"a": "\x00"}}]),
        "label key surrogate": inv(nodes=[{**node, "labels": {"\ud800": "v"}}]),
        "gpu 10**30": inv(nodes=[{**node, "capacity": {"gpu": 10**30}}]),
        "memory 2**63": inv(nodes=[{**node, "capacity": {"memory": 2**63}}]),
        "allocated over capacity": inv(nodes=[{**node, "allocated": {"gpu": 99}}]),
        "allocated list": inv(nodes=[{**node, "allocated": [1]}]),
        "reserved pool name": inv({"name": "import"}),
    }


YAML_INVENTORIES = {
    "huge hex gpu": f"pool: {{name: fuzzpool}}\nnodes: [{{name: n1, capacity: {{gpu: {HUGE_HEX}}}}}]\n",
    "huge hex label": (
        f"pool: {{name: fuzzpool}}\nnodes: [{{name: n1, labels: {{a: {HUGE_HEX}}}, capacity: {{gpu: 1}}}}]\n"
    ),
    "\\0 escape": 'pool: {name: fuzzpool, description: "a\\0b"}\n',
    "python tag": "pool: !!python/name:os.system {}\n",
    "anchors": "n: &n {name: n1, capacity: {gpu: 1}}\npool: {name: fuzzpool}\nnodes: [*n, *n]\n",
    "sequence": "- 1\n",
    "deep": "[" * 5000 + "]" * 5000,
    ".nan seconds": "pool: {name: fuzzpool, sim_task_seconds: .nan}\n",
}


def probes() -> list[tuple[str, str, str, dict[str, Any], str]]:
    """(label, method, path, requests kwargs, which token) for every hand-made case."""
    cases: list[tuple[str, str, str, dict[str, Any], str]] = []
    json_headers = {"Content-Type": "application/json"}
    yaml_headers = {"Content-Type": "application/yaml"}
    for label, spec in workflow_specs().items():
        for dry_run in (False, True):
            # json.dumps escapes lone surrogates, which a JSON body can carry as \ud800
            body = json.dumps({"pool": "demo", "spec": spec, "dry_run": dry_run})
            cases.append((f"workflow {label}{' (dry run)' if dry_run else ''}", "post", "/api/workflows/",
                          {"data": body, "headers": json_headers}, "user"))
    for label, kwargs in {
        "yaml body": {"data": YAML_OK, "params": {"pool": "demo", "dry_run": "true"}, "headers": yaml_headers},
        "yaml body invalid UTF-8": {"data": b"\xff\xfeworkflow", "params": {"pool": "demo"}, "headers": yaml_headers},
        "yaml body raw NUL": {"data": b"workflow: {name: \x00}", "params": {"pool": "demo"}, "headers": yaml_headers},
        "yaml body 3 MB": {"data": b"a: " + b"x" * (3 * 2**20), "params": {"pool": "demo"}, "headers": yaml_headers},
        "yaml body no pool": {"data": YAML_OK, "headers": yaml_headers},
        "idempotency key 1000 chars": {"json": {"pool": "demo", "spec": spec_with(), "dry_run": True},
                                       "headers": {"Idempotency-Key": "k" * 1000}},
        "idempotency key NUL": {"json": {"pool": "demo", "spec": spec_with(), "dry_run": True},
                                "headers": {"Idempotency-Key": "a\x00b"}},
        "bad JSON": {"data": b'{"pool": ', "headers": json_headers},
        "NaN in JSON": {"data": b'{"pool": "demo", "spec": NaN}', "headers": json_headers},
        "form body": {"data": {"pool": "demo", "spec": "x"}},
        "text/plain body": {"data": b"hello", "headers": {"Content-Type": "text/plain"}},
    }.items():
        cases.append((f"workflow {label}", "post", "/api/workflows/", kwargs, "user"))
    for label, document in inventories().items():
        cases.append((f"import {label}", "post", "/api/pools/import/?dry_run=true",
                      {"data": json.dumps(document), "headers": json_headers}, "staff"))
    for label, text in YAML_INVENTORIES.items():
        cases.append((f"import yaml {label}", "post", "/api/pools/import/?dry_run=true",
                      {"data": text.encode(), "headers": yaml_headers}, "staff"))
    cases.append(("pool PUT multipart", "put", "/api/pools/demo/", {"files": {"topology_keys": (None, "[]")}}, "staff"))
    for path in ("/api/pools/a%00b/", "/api/pools/a%00b/nodes/", "/api/pools/a%00b/inventory/",
                 "/api/pools/demo/nodes/a%00b/", "/api/workflows/a%00b/"):
        cases.append((f"GET {path}", "get", path, {}, "user"))
    cases.append(("cancel NUL id", "post", "/api/workflows/a%00b/cancel/", {}, "user"))
    for query in ("label=%00", "label==x", "topology=%00=1", "search=%00", "schedulable=maybe", "limit=-1",
                  "offset=99999999999999999999", "label=" + ",".join(f"a{i}=b" for i in range(500))):
        cases.append((f"nodes ?{query[:40]}", "get", f"/api/pools/demo/nodes/?{query}", {}, "user"))
    for query in ("status=%00", "status=BAD", "pool=%00", "name=" + "a" * 10000):
        cases.append((f"workflows ?{query[:40]}", "get", f"/api/workflows/?{query}", {}, "user"))
    return cases


def check(response: requests.Response) -> bool:
    if response.status_code >= 500:
        return False
    if response.status_code < 400:
        return True
    try:
        body = response.json()
    except ValueError:
        return False
    if not isinstance(body, dict) or set(body) != {"code", "message", "details"}:
        return False
    if body["code"] == "validation_error":
        errors = body["details"].get("errors")
        return isinstance(errors, list) and all(isinstance(e, dict) and set(e) == {"path", "message"} for e in errors)
    return True


def run_probes(url: str, tokens: dict[str, str], verbose: bool) -> int:
    failures = 0
    for label, method, path, kwargs, who in probes():
        headers = {"Authorization": f"Token {tokens[who]}", **kwargs.pop("headers", {})}
        try:
            response = requests.request(method, url + path, headers=headers, timeout=120, **kwargs)
        except requests.RequestException as exc:
            print(f"FAIL {label}: {exc!r}")
            failures += 1
            continue
        ok = check(response)
        failures += not ok
        if verbose or not ok:
            print(f"{'ok  ' if ok else 'FAIL'} {response.status_code} {label}: {response.text[:160]!r}")
    print(f"probes: {len(probes())} sent, {failures} failed")
    return failures


def run_schemathesis(url: str, tokens: dict[str, str], max_examples: int, seed: int) -> int:
    exe = shutil.which("schemathesis") or str(Path(sys.executable).with_name("schemathesis"))
    rc = 0
    for who, checks in (("user", "not_a_server_error"), ("staff", "all")):
        command = [exe, "run", f"{url}/api/schema/", "-H", f"Authorization: Token {tokens[who]}",
                   "--checks", checks, "--max-examples", str(max_examples), "--seed", str(seed)]
        print("==>", " ".join(command).replace(tokens[who], who.upper()), flush=True)
        rc |= subprocess.run(command, check=False).returncode
    return rc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8125")
    parser.add_argument("--user-token", required=True)
    parser.add_argument("--staff-token", required=True)
    parser.add_argument("--schemathesis", action="store_true", help="also run the schemathesis CLI")
    parser.add_argument("--max-examples", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("-v", "--verbose", action="store_true", help="print every probe, not only failures")
    args = parser.parse_args(argv)
    tokens = {"user": args.user_token, "staff": args.staff_token}
    url = args.url.rstrip("/")
    failures = run_probes(url, tokens, args.verbose)
    if args.schemathesis:
        failures += run_schemathesis(url, tokens, args.max_examples, args.seed)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
