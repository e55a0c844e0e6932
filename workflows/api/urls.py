from django.urls import path
from rest_framework.routers import SimpleRouter

from workflows.api.views import MeView, WorkflowViewSet

router = SimpleRouter()
router.register("workflows", WorkflowViewSet, basename="workflow")
urlpatterns = [path("me/", MeView.as_view(), name="me"), *router.urls]
