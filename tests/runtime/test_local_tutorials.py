"""OSMO's group-communication and data tutorials (our versions under ``examples/osmo/local/``) through the
real stack: PostgreSQL, Redis, a `celery worker` and beat dispatching each task to the ``local`` backend,
the task runtime in bubblewrap, ``file://`` storage; logs read back with the installed `osmo` CLI
(docs/runtime.md). The fixtures are the local end-to-end tests' (tests/dispatch/test_local_end_to_end.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.storage import committed_files
from tests.conftest import wait_for
from tests.dispatch.test_local_end_to_end import finished, local_pool, osmo_cli  # noqa: F401 (local_pool: a fixture)
from tests.runtime.conftest import free_port
from workflows.errors import WorkflowSpecInvalidError
from workflows.models import Task, Workflow
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db(transaction=True)
LOCAL_EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "osmo" / "local"


def submit_example(user, name: str, **values: str | int) -> Workflow:
    try:
        return workflow_submit(user=user, pool_name="local", spec=(LOCAL_EXAMPLES / f"{name}.yaml").read_text(),
                               values=dict(values))[0]
    except WorkflowSpecInvalidError as exc:  # say which field, not only that it is invalid
        pytest.fail(f"{name} refused: {exc.details}")


def run_to_the_end(workflow: Workflow) -> Workflow:
    wait_for(lambda: finished(workflow), timeout=240, message=f"{workflow.workflow_id} to finish")
    return workflow


def tasks_of(workflow: Workflow) -> list[tuple[str, str, int | None, str]]:
    return sorted(Task.objects.filter(workflow=workflow).values_list("name", "status", "exit_code", "failure_message"))


def command_lines(live_server, user, workflow: Workflow, task: str) -> list[str]:
    """The task's log through `osmo workflow logs`, without the runtime's own ``[osmo]`` lines."""
    answer = osmo_cli(live_server, user, "workflow", "logs", workflow.workflow_id, "--task", task)
    assert answer.returncode == 0, answer.stderr
    return [line for line in answer.stdout.splitlines() if line and not line.startswith("[osmo]")]


@pytest.mark.usefixtures("local_pool")
def test_group_communication_client_reaches_the_server_over_the_loopback(user, celery_worker_factory, celery_beat,
                                                                          live_server, tmp_path):
    # given a worker and beat, and a port nothing else listens on
    celery_worker_factory("local", concurrency=2)
    port = free_port()

    # when the server and the client of one group run
    workflow = run_to_the_end(submit_example(user, "group-communication", port=port))

    # then both completed, the client got the server's greeting over TCP and said so in its log
    assert workflow.status == "COMPLETED", tasks_of(workflow)
    assert tasks_of(workflow) == [("client", "COMPLETED", 0, ""), ("server", "COMPLETED", 0, "")]
    assert command_lines(live_server, user, workflow, "server") == [
        f"Server: listening on port {port}", "Server: greeting sent", "Server: complete"]
    assert command_lines(live_server, user, workflow, "client")[0] == f"Client: calling the server at 127.0.0.1:{port}"
    assert command_lines(live_server, user, workflow, "client")[-1] == "Client: received hello"
    # and the client's {{output}} was committed to its artifact URL
    reply_url = f"{(tmp_path / 'artifacts').as_uri()}/{workflow.global_id}/client"
    assert committed_files(reply_url) == ["reply.txt"]
    assert Path(reply_url.removeprefix("file://"), "reply.txt").read_text() == "hello\n"


@pytest.mark.usefixtures("local_pool")
def test_data_upload_then_download_through_a_file_url(user, celery_worker_factory, celery_beat, live_server,
                                                      tmp_path):
    # given a worker and beat, and an empty storage folder
    celery_worker_factory("local", concurrency=2)
    storage = tmp_path / "storage"
    storage.mkdir()

    # when the download tutorial runs before anything was uploaded
    early = run_to_the_end(submit_example(user, "data-download", storage_url=storage.as_uri()))

    # then it fails with OSMO's download code, naming the URL, and its command never ran
    assert early.status == "FAILED", tasks_of(early)
    [(name, status, code, message)] = tasks_of(early)
    assert (name, status, code) == ("load-results", "FAILED", 2010)
    assert message.startswith(f"download of input 0 failed: {storage.as_uri()}/models/: no such file or prefix")
    assert command_lines(live_server, user, early, "load-results") == []

    # when the upload tutorial runs, then the download tutorial again
    upload = run_to_the_end(submit_example(user, "data-upload", storage_url=storage.as_uri()))
    download = run_to_the_end(submit_example(user, "data-download", storage_url=storage.as_uri()))

    # then the upload's {{output}} landed under the output URL, committed
    assert upload.status == "COMPLETED", tasks_of(upload)
    assert committed_files(f"{storage.as_uri()}/models/") == ["results/model.pth", "results/origin.txt"]
    assert (storage / "models" / "results" / "model.pth").read_text() == "model weights v1\n"
    assert command_lines(live_server, user, upload, "save-results") == ["Wrote 2 files; the runtime uploads them"]
    # and the download read it from {{input:0}}
    assert download.status == "COMPLETED", tasks_of(download)
    assert command_lines(live_server, user, download, "load-results") == [
        "Files in /osmo/input/0:", "./results/model.pth", "./results/origin.txt",
        "model.pth says: model weights v1", f"written by {upload.workflow_id}"]
