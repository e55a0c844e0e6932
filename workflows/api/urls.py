from rest_framework.routers import SimpleRouter

from workflows.api.views import WorkflowViewSet

router = SimpleRouter()
router.register("workflows", WorkflowViewSet, basename="workflow")
urlpatterns = router.urls
