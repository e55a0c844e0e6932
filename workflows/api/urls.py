from django.urls import path
from rest_framework.routers import SimpleRouter

from workflows.api.resources import ResourceInfoView, ResourceListView
from workflows.api.runtime import RuntimeBarrierView, RuntimeStatusView
from workflows.api.tasks import TaskListView, TaskSummaryView
from workflows.api.views import MeView, TagListView, WorkflowViewSet

router = SimpleRouter()
router.register("workflows", WorkflowViewSet, basename="workflow")
urlpatterns = [path("me/", MeView.as_view(), name="me"), path("tags/", TagListView.as_view(), name="tags"),
               # "workflow-": a task's own osmo command may list its submitter's tasks, as it reads workflows
               path("tasks/", TaskListView.as_view(), name="workflow-tasks"),
               path("tasks/summary/", TaskSummaryView.as_view(), name="workflow-tasks-summary"),
               # "pool-": read like pools (a task's osmo command reads them too)
               path("resources/", ResourceListView.as_view(), name="pool-resources"),
               path("resources/<str:node>/", ResourceInfoView.as_view(), name="pool-resource"),
               path("runtime/barrier/", RuntimeBarrierView.as_view(), name="runtime-barrier"),
               path("runtime/status/", RuntimeStatusView.as_view(), name="runtime-status"), *router.urls]
