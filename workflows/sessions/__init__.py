"""Sessions into running tasks: ``osmo workflow exec`` and ``osmo workflow port-forward`` (docs/design.md §13).

:mod:`workflows.sessions.service` checks and records (synchronous, the REST call and the ticket);
:mod:`workflows.sessions.consumers` are the Django Channels consumers, one per kind, that carry the bytes
between the websocket and the pool's backend (:class:`scheduler.dispatch.base.SessionBackend`)."""
