"""The runtime's exit codes, after OSMO's table (docs/user_guide/workflows/exit/exit_codes.rst in OSMO).

A command's own code (0-255) is passed through. The runtime's failures use OSMO's service codes; they
do not fit a process exit status (0-255), so the runtime reports them in its *result* (the
termination message, see :mod:`runtime.result`) and exits with :data:`PROCESS_EXIT_RUNTIME_FAILURE`.
"""

from __future__ import annotations

UNKNOWN_RUNTIME_ERROR = 2002
DOWNLOAD_FAILED = 2010
MOUNT_FAILED = 2011
UPLOAD_FAILED = 2012
INVALID_TOKEN = 2020
SERVICE_TIMEOUT = 2021
SERVICE_MESSAGE_FAILED = 2022
BARRIER_FAILED = 2024
START_TIMEOUT = 3005

#: The process exit status of a runtime that failed by itself (the OSMO code is in the result).
PROCESS_EXIT_RUNTIME_FAILURE = 255

DESCRIPTIONS: dict[int, str] = {
    UNKNOWN_RUNTIME_ERROR: "unknown runtime error",
    DOWNLOAD_FAILED: "download failed",
    MOUNT_FAILED: "mount failed",
    UPLOAD_FAILED: "upload failed",
    INVALID_TOKEN: "invalid authentication token for the service",
    SERVICE_TIMEOUT: "service connection timed out",
    SERVICE_MESSAGE_FAILED: "failed to send/receive messages to/from the service",
    BARRIER_FAILED: "barrier synchronization failed",
    START_TIMEOUT: "start timeout",
}
