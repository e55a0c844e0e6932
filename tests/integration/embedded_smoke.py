"""Run by tests/integration/test_embedded_default.py inside `manage.py shell` on the embedded default
(SQLite): a placed workflow, a waiting one, then every page and filtered endpoint. Prints JSON."""

import json
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from scheduler.models import Pool
from workflows.scheduling.cycle import placement_cycle_run
from workflows.services import workflow_submit

ROOT = Path.cwd()
call_command("osmo_bootstrap", stdout=open("/dev/null", "w"))  # noqa: SIM115
admin = get_user_model().objects.get(username="admin")
pool = Pool.objects.get(name="nvl72")
spec = (ROOT / "examples" / "multiple-nvl72-same-zone.yaml").read_text()
placed, _ = workflow_submit(user=admin, pool_name="nvl72", spec=spec)
waiting, _ = workflow_submit(user=admin, pool_name="nvl72", spec=spec.replace("multiple-nvl72-same-zone", "second"))
placement_cycle_run(pool_id=pool.pk)
client = Client(HTTP_HOST="127.0.0.1")
client.force_login(admin)
urls = [
    "/", "/workflows/", "/workflows/?status=RUNNING&pool=nvl72&sort=-submitted", f"/workflows/{placed.workflow_id}/",
    f"/workflows/{placed.workflow_id}/?partial=1", f"/workflows/{waiting.workflow_id}/", "/pools/", "/pools/nvl72/",
    "/pools/nvl72/?partial=1", "/submit/", "/api/pools/", "/api/pools/nvl72/",
    "/api/pools/nvl72/nodes/?topology=zone=zone-1,rack=rack-0001&schedulable=true&search=nvl72",
    "/api/pools/nvl72/nodes/?label=topology.kubernetes.io/zone=zone-1", "/api/workflows/?status=RUNNING",
    f"/api/workflows/{placed.workflow_id}/",
    f"/admin/scheduler/node/?pool__id__exact={pool.pk}&topology_zone=zone-1&q=rack",
    f"/admin/scheduler/pool/{pool.pk}/change/", f"/admin/scheduler/pool/{pool.pk}/hierarchy/",
    "/admin/workflows/workflow/", "/api/docs/", "/api/schema/",
]
statuses = {url: client.get(url).status_code for url in urls}
dry = client.post("/api/workflows/", {"pool": "nvl72", "spec": spec, "dry_run": True}, content_type="application/json")
statuses["POST /api/workflows/ dry_run"] = dry.status_code
print(json.dumps({"statuses": statuses, "placed": placed.workflow_id,
                  "placed_status": placed.__class__.objects.get(pk=placed.pk).status}))
