"""From a task's rows to the :class:`~scheduler.dispatch.pod.request.PodRequest` dispatch sends, on the
workflows' side of the layer rule: the request itself (:mod:`.request`), the spec's pod fields and
tokens (:mod:`.podspec`), the task's credentials (:mod:`.credentials`), the runtime plan and the task's
API token (:mod:`.runtime`) and the platform's node selection (:mod:`.platform_nodes`, pure). The
Kubernetes side of a pod lives in :mod:`scheduler.dispatch.pod`."""
