"""One pod as the backends are asked for it, on the scheduler's side of the layer rule: the
backend-neutral :class:`~scheduler.dispatch.pod.request.PodRequest` (:mod:`.request`), and its
Kubernetes objects: the manifest (:mod:`.manifest`, loads without the client), the objects beside it
(:mod:`.objects`: the pod's credential Secret and mounts), the names (:mod:`.naming`) and the wrap
around the runtime (:mod:`.runtime_wrap`). The workflows app builds the request
(:mod:`workflows.scheduling.pod`). This package imports no framework."""
