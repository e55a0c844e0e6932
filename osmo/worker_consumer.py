"""The Celery worker's consumer, surviving broker restarts (docs/operations.md, "Broker outage").

With celery 5.7.0 and kombu 5.7.0 (the newest releases) and the Redis transport, a worker that loses
its broker while it holds an unacknowledged message dies: ``Consumer.on_connection_error_after_connected``
first ``collect()``s the broken connection, which drops the transport's client but leaves the default
channel open, then ``close()``s it; closing the channel restores the unacknowledged messages, which
asks the dropped client for its address: ``AttributeError("'NoneType' object has no attribute
'hostname'")`` in ``kombu.transport.redis.Channel._connparams``. ``ignore_errors`` ignores connection
errors only, so the AttributeError ends the worker ("Unrecoverable error"). The same failure (a
channel closed after its connection's client is gone) was reported as
https://github.com/celery/kombu/issues/582. Reproduced by tests/ops/test_broker_restart.py.

The patch: the AttributeError of that close is logged and the consumer goes on to reconnect, as it
does after any other connection error. The messages whose restore failed stay in Redis's unacked
set and are restored by kombu after the visibility timeout (``CELERY_BROKER_TRANSPORT_OPTIONS``);
the periodic tick re-drives placement and dispatch meanwhile. Set with ``CELERY_WORKER_CONSUMER``.
Remove when a kombu release closes a collected connection's channels without its client.
"""

from __future__ import annotations

import logging
from typing import Any

from celery.worker.consumer import Consumer as CeleryConsumer

logger = logging.getLogger(__name__)


class Consumer(CeleryConsumer):
    def on_connection_error_after_connected(self, exc: Any) -> None:
        try:
            super().on_connection_error_after_connected(exc)
        except AttributeError:
            # Celery's own handler set self.connection to None before the close that raised.
            self.connection = None
            logger.warning("broker.close_after_connection_loss_failed", exc_info=True)
