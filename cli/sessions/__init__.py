"""``osmo workflow exec`` and ``osmo workflow port-forward``: sessions into a running task (docs/cli.md).

Each session is a REST call that does every check and answers a single-use ticket
(``POST /api/workflows/{id}/tasks/{task}/sessions/``), then a websocket opened with that ticket and the
same credentials as the API (docs/api.md, "Sessions into running tasks"). Exec speaks Kubernetes'
``v5.channel.k8s.io`` frames; port-forward opens one websocket per accepted local connection, and keeps four
spare sessions per forwarded port opened ahead (``?connect=deferred``: the service connects to the task's port
only on the spare's ``connect`` message), so a new local connection skips both round trips.

One module per job: :mod:`cli.sessions.opening` opens a session (the REST call, its websocket, the wait of
``--keep-alive``), :mod:`cli.sessions.exec_stream` carries one exec session's frames (also the transport of
``osmo workflow rsync``), :mod:`cli.sessions.exec_command` is ``osmo workflow exec`` (a terminal, or a command
in every task of a group with its output prefixed), :mod:`cli.sessions.port_forward` is ``osmo workflow
port-forward`` (its ports, the TCP bridge and the UDP forward) and :mod:`cli.sessions.spares` keeps its spare
sessions ready.
"""
