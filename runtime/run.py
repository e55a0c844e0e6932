"""The runtime's steps for one task, in OSMO's order (docs/runtime.md):

1. download every input into ``{{input:N}}`` (2010 when one fails);
2. wait at the group's barrier, when the plan has one (start timeout 3005, service 2020/2021/2024);
3. write the plan's files, then run the command with its environment; its stdout and stderr are the
   runtime's own (the container log), a checkpoint thread uploads each checkpoint folder every
   ``frequency`` while it runs;
4. upload ``{{output}}`` to every output URL and the task's artifact URL, and each checkpoint a last
   time (2012 when one fails; the command's own code is kept in the message);
5. write the result (``{"exit_code", "command_exit_code", "message"}``, the termination message) and
   exit with the command's code, or :data:`runtime.exitcodes.PROCESS_EXIT_RUNTIME_FAILURE` when the
   runtime failed (the OSMO code is in the result: process statuses stop at 255).

SIGTERM and SIGINT are passed on to the command; its outputs are still uploaded after it exits.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

from runtime import exitcodes
from runtime.barrier import BarrierError, barrier_wait
from runtime.environment import command_env
from runtime.plan import CheckpointSpec, TaskPlan
from runtime.storage import StorageError, download, upload


@dataclass(frozen=True, slots=True)
class Result:
    exit_code: int  # the task's code: the command's, or OSMO's for a runtime failure
    message: str = ""
    command_exit_code: int | None = None

    @property
    def process_exit(self) -> int:
        if self.exit_code <= 255:
            return self.exit_code
        return exitcodes.PROCESS_EXIT_RUNTIME_FAILURE

    def to_json(self) -> str:
        return json.dumps({"exit_code": self.exit_code, "command_exit_code": self.command_exit_code,
                           "message": self.message})


def _names(paths: tuple[str, ...], shown: int = 10) -> str:
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more


def log_line(text: str) -> None:
    sys.stderr.write(f"[osmo] {text}\n")
    sys.stderr.flush()


def substitute(text: str, plan: TaskPlan) -> str:
    """``{{output}}`` and ``{{input:N}}`` replaced by this plan's folders."""
    text = text.replace("{{output}}", plan.output_dir)
    return re.sub(r"\{\{input:(\d+)\}\}", lambda m: plan.input_path(int(m.group(1))), text)


class _Checkpointer(threading.Thread):
    """Uploads one checkpoint folder every ``frequency_s`` (from the end of one upload to the start of
    the next, as OSMO's cadence) until stopped."""

    def __init__(self, spec: CheckpointSpec, plan: TaskPlan, log: Callable[[str], None]) -> None:
        super().__init__(daemon=True, name=f"checkpoint {spec.path}")
        self.spec = spec
        self.path = substitute(spec.path, plan)
        self.stopped = threading.Event()
        self.log = log

    def run(self) -> None:
        while not self.stopped.wait(self.spec.frequency_s):
            self.upload()

    def upload(self) -> None:
        self.log(f"checkpointing {self.path} to {self.spec.url}")
        done = upload(self.path, self.spec.url, regex=self.spec.regex)
        self.log(f"checkpointing {self.path} to {self.spec.url} finished ({done.files} files, {done.bytes} bytes)")


def _exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def run(plan: TaskPlan, *, log: Callable[[str], None] = log_line) -> Result:
    """Run the plan's steps (see the module docstring) and return the task's result."""
    os.makedirs(plan.output_dir, exist_ok=True)
    for index, spec in enumerate(plan.inputs):
        dest = plan.input_path(index)
        log(f"downloading input {index} from {spec.url} to {dest}")
        try:
            done = download(spec.url, dest, regex=spec.regex, committed_only=spec.committed_only)
        except StorageError as exc:
            return Result(exitcodes.DOWNLOAD_FAILED, f"download of input {index} failed: {exc}")
        log(f"downloaded input {index}: {done.files} files, {done.bytes} bytes")
        if done.skipped:
            log(f"not downloaded (links leading out of the input, or not files): {_names(done.skipped)}")
    if plan.barrier is not None:
        try:
            barrier_wait(plan.barrier, deadline_s=plan.start_timeout_s, log=log)
        except BarrierError as exc:
            return Result(exc.code, str(exc))
    for file in plan.files:
        path = substitute(file.path, plan)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(substitute(file.contents, plan))
    argv = [substitute(part, plan) for part in (*plan.command, *plan.args)]
    env = command_env(os.environ, {name: substitute(value, plan) for name, value in plan.env.items()})
    checkpointers = [_Checkpointer(spec, plan, log) for spec in plan.checkpoints]
    try:
        process = subprocess.Popen(argv, env=env)
    except OSError as exc:
        return Result(127 if isinstance(exc, FileNotFoundError) else 126,
                      f"the command could not be started: {exc}", command_exit_code=None)

    def forward(signum: int, _frame: FrameType | None) -> None:
        process.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)} \
        if threading.current_thread() is threading.main_thread() else {}
    for checkpointer in checkpointers:
        checkpointer.start()
    try:
        code = _exit_status(process.wait())
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for checkpointer in checkpointers:
            checkpointer.stopped.set()
    log(f"the command exited with code {code}")
    uploads = [(plan.output_dir, spec.url, spec.regex) for spec in plan.outputs]
    if plan.artifact_url:
        uploads.append((plan.output_dir, plan.artifact_url, ""))
    try:
        for checkpointer in checkpointers:
            checkpointer.join()
            checkpointer.upload()
        for src, url, regex in uploads:
            log(f"uploading {src} to {url}")
            done = upload(src, url, regex=regex)
            log(f"uploaded {done.files} files, {done.bytes} bytes to {url}")
            if done.skipped:
                log(f"not uploaded (links leading out of {{{{output}}}}, or not files): {_names(done.skipped)}")
    except StorageError as exc:
        return Result(exitcodes.UPLOAD_FAILED, f"upload failed: {exc} (the command exited with code {code})",
                      command_exit_code=code)
    return Result(code, "" if code == 0 else f"the command exited with code {code}", command_exit_code=code)


def main_run(plan_text: str, *, result_path: str, log: Callable[[str], None] = log_line) -> int:
    """Parse the plan, run it, write the result to ``result_path`` ("" = nowhere); the process exit status."""
    from runtime.plan import PlanInvalidError

    started = time.monotonic()
    try:
        plan = TaskPlan.from_json(plan_text)
    except PlanInvalidError as exc:
        result = Result(exitcodes.UNKNOWN_RUNTIME_ERROR, f"the task plan is invalid: {exc}")
    else:
        result = run(plan, log=log)
    if result.exit_code > 255:
        log(f"task failed with OSMO code {result.exit_code} "
            f"({exitcodes.DESCRIPTIONS.get(result.exit_code, 'runtime failure')}): {result.message}")
    log(f"runtime finished in {time.monotonic() - started:.3f} s")
    if result_path:
        try:
            with open(result_path, "w", encoding="utf-8") as handle:
                handle.write(result.to_json())
        except OSError as exc:
            log(f"could not write the result to {result_path}: {exc}")
    return result.process_exit
