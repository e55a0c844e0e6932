from rest_framework.routers import SimpleRouter

from scheduler.api.views import NodeViewSet, PoolViewSet

router = SimpleRouter()
router.register(r"pools", PoolViewSet, basename="pool")
router.register(r"pools/(?P<pool_name>[^/]+)/nodes", NodeViewSet, basename="pool-node")
urlpatterns = router.urls
