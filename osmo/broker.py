"""Celery's filesystem broker (the embedded default of ``make run``) with message files that appear
whole.

kombu's filesystem transport creates a message file, then locks and writes it; a consumer takes no
lock: it moves the file away and reads it. A consumer that comes between the two reads an empty file,
and the worker stops ("Unrecoverable error: JSONDecodeError"; celery/kombu#1551, open). It happens
under load, and ``make run`` then stops everything. Here a message is written under a name no
consumer picks (not ``<...>.<queue>.msg``) and renamed to its real name once complete: a rename
within one folder is atomic, so a consumer sees the whole file or none. Settings name it by its alias
``osmofs://`` (registered in :mod:`osmo.celery`).
"""

from __future__ import annotations

import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

ALIAS = "osmofs"


class Channel(filesystem.Channel):
    def _put(self, queue: str, message: Any, **kwargs: Any) -> None:  # type: ignore[override]  # kombu passes kwargs
        """Put ``message`` onto ``queue``: written aside, then renamed into place (kombu's name)."""
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        partial = os.path.join(self.data_folder_out, f".partial-{uuid.uuid4().hex}")
        try:
            with open(partial, "wb") as file:
                file.write(str_to_bytes(dumps(message)))
            os.replace(partial, os.path.join(self.data_folder_out, name))
        except OSError as exc:
            raise ChannelError(f"Cannot add file {name!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
