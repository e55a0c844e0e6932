from django.urls import path

from pages import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("workflows/", views.workflow_list, name="workflow-list"),
    path("workflows/<str:workflow_id>/", views.workflow_detail, name="workflow-detail"),
    path("workflows/<str:workflow_id>/cancel/", views.workflow_cancel, name="workflow-cancel"),
    path("backends/", views.backend_list, name="backend-list"),
    path("pools/", views.pool_list, name="pool-list"),
    path("pools/<str:name>/", views.pool_detail, name="pool-detail"),
    path("submit/", views.submit, name="submit"),
]
