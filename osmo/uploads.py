"""File parts of a multipart request are bounded like any other body (docs/operations.md, "Limits").

Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` leaves file parts out and streams them to disk without a
limit; the only files this service takes are specs (at most 1 MiB). :class:`BoundedUploadHandler`,
first of ``FILE_UPLOAD_HANDLERS``, refuses a multipart body longer than that setting before reading
it, and a file part that grows past it while it streams: ``RequestDataTooBig``, which the API answers
with 413 ``request_too_large`` and the pages with 400.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadhandler import FileUploadHandler


class BoundedUploadHandler(FileUploadHandler):
    """Passes file data on to the next handlers while the request's files stay within
    ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes in all."""

    received = 0

    @staticmethod
    def _refuse() -> None:
        raise RequestDataTooBig(f"The request's files exceed {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes "
                                "(DATA_UPLOAD_MAX_MEMORY_SIZE).")

    def handle_raw_input(self, input_data: Any, META: Any, content_length: int, boundary: Any,
                         encoding: str | None = None) -> None:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and content_length > limit:
            self._refuse()
        self.received = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.received += len(raw_data)
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and self.received > limit:
            self._refuse()
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None  # the next handler makes the file
