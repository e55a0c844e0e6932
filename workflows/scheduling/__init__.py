"""Moving queued workflows onto the pool: the placement cycle (:mod:`.cycle`), the pod lifecycle after
placement (:mod:`.pods`), the shared lock order (:mod:`.locks`) and solver requests built from rows
(:mod:`.requests`). Status writes go through :mod:`workflows.lifecycle.transitions`; enqueueing
through :mod:`workflows.jobs`."""
