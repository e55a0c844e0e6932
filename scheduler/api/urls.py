from rest_framework.routers import SimpleRouter

from scheduler.api.views import BackendViewSet, NodeViewSet, PoolViewSet

router = SimpleRouter()
router.register(r"backends", BackendViewSet, basename="backend")
router.register(r"pools", PoolViewSet, basename="pool")
router.register(r"pools/(?P<pool_name>[^/]+)/nodes", NodeViewSet, basename="pool-node")
urlpatterns = router.urls
