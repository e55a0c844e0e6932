"""What rendering a spec template in a child process costs (docs/spec.md, "Templates").

Renders one small template ``--count`` times in this process (the sandbox only) and as many times
through the fork server under the default process limits (``workflows.spec.isolation``), and prints
milliseconds per rendering of each and their difference. The first isolated rendering (which starts
the fork server) is left out. Pure: no database, no Django.

    .venv/bin/python -m bench.template_render --count 100
"""

from __future__ import annotations

import argparse
import json
import time

from workflows.spec.isolation import ProcessLimits
from workflows.spec.template import TemplateLimits, render_spec

SPEC = """default-values:
  shards: 4
workflow:
  name: sharded
  groups:
  - name: train
    tasks:
{% for i in range(shards) %}
    - {name: shard{{ i }}, image: busybox, command: [torchrun]}
{% endfor %}
"""


def per_render_ms(limits: TemplateLimits, count: int) -> float:
    started = time.perf_counter()
    for index in range(count):
        render_spec(SPEC, values={"shards": 2 + index % 4}, limits=limits)
    return (time.perf_counter() - started) * 1000 / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100)
    args = parser.parse_args()
    isolated = TemplateLimits(process=ProcessLimits())
    render_spec(SPEC, limits=isolated)  # starts the fork server
    in_process = per_render_ms(TemplateLimits(), args.count)
    child = per_render_ms(isolated, args.count)
    print(json.dumps({"count": args.count, "in_process_ms": round(in_process, 3), "isolated_ms": round(child, 3),
                      "extra_ms": round(child - in_process, 3)}))


if __name__ == "__main__":
    main()
