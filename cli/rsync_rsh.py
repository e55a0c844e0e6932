"""The remote shell ``osmo workflow rsync`` gives ``rsync`` (its ``--rsh``): an exec session instead of ssh.

``rsync`` runs ``python -m cli.rsync_rsh [--timeout S] WF TASK COMMAND...`` (TASK is the "host" of
``TASK:PATH``); the words of COMMAND are joined with spaces and run by ``/bin/sh -c`` in the task, as ssh's
remote shell runs them, with this process's stdin and stdout as the command's: rsync's own protocol, carried
by the session's ``v5.channel.k8s.io`` frames. The exit code is the command's; 255 when no session opened
(as ssh's).

rsync hands its remote shell one end of a socket pair it made non-blocking: the shell's output is set
back to blocking first, or a write while rsync is busy elsewhere would fail half done (Python's
buffered writer drops what the socket did not take) and rsync would read a torn stream.
"""

from __future__ import annotations

import os
import sys

from cli.errors import CliError
from cli.main import api_client
from cli.sessions.exec_stream import CLOSE_REASONS, ConnectionLost, exec_run
from cli.sessions.opening import session_open

NO_SESSION = 255


def _write(stream: object) -> object:
    buffer = stream.buffer  # type: ignore[attr-defined]

    def write(data: bytes) -> None:
        buffer.write(data)
        buffer.flush()
    return write


def run(argv: list[str]) -> int:
    timeout = 10.0
    if argv[:1] == ["--timeout"] and len(argv) > 1:
        timeout, argv = float(argv[1]), argv[2:]
    if len(argv) < 3:
        sys.stderr.write("usage: python -m cli.rsync_rsh [--timeout S] WF TASK COMMAND...\n")
        return NO_SESSION
    workflow_id, task, command = argv[0], argv[1], " ".join(argv[2:])
    for fd in (0, 1):  # rsync's socket pair is non-blocking (module doc): wait on a full one instead
        try:
            os.set_blocking(fd, True)
        except OSError:  # closed or not a file: nothing to wait on
            pass
    try:
        api = api_client()
        with api:
            ws = session_open(api, workflow_id, task, {"kind": "exec", "command": ["/bin/sh", "-c", command],
                                                       "tty": False}, connect_timeout=timeout)
            result = exec_run(ws, tty=False, forward_stdin=True, out=_write(sys.stdout), err=_write(sys.stderr))
    except ConnectionLost as exc:
        sys.stderr.write(f"osmo: the session into {workflow_id}/{task} was lost: {exc}\n")
        return NO_SESSION
    except CliError as exc:
        sys.stderr.write("\n".join(exc.lines()) + "\n")
        return NO_SESSION
    if result.exit_code is None:
        reason = CLOSE_REASONS.get(result.close_code, f"the service closed the session ({result.close_code})")
        sys.stderr.write(f"osmo: the session into {workflow_id}/{task} ended: {reason}\n")
        return NO_SESSION
    return result.exit_code


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
