from django.urls import path
from rest_framework.routers import SimpleRouter

from workflows.api.runtime import RuntimeBarrierView, RuntimeStatusView
from workflows.api.views import MeView, TagListView, WorkflowViewSet

router = SimpleRouter()
router.register("workflows", WorkflowViewSet, basename="workflow")
urlpatterns = [path("me/", MeView.as_view(), name="me"), path("tags/", TagListView.as_view(), name="tags"),
               path("runtime/barrier/", RuntimeBarrierView.as_view(), name="runtime-barrier"),
               path("runtime/status/", RuntimeStatusView.as_view(), name="runtime-status"), *router.urls]
