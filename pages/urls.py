from django.urls import path

from pages import app_views, views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("workflows/", views.workflow_list, name="workflow-list"),
    path("workflows/<str:workflow_id>/", views.workflow_detail, name="workflow-detail"),
    path("workflows/<str:workflow_id>/cancel/", views.workflow_cancel, name="workflow-cancel"),
    # (.../tasks/<task>/ports/<port>/ and .../absolute-ports/<port>/: the "Open port" proxy, served by the ASGI
    # app ahead of these views: workflows/sessions/proxy.py)
    path("workflows/<str:workflow_id>/tasks/<str:task>/", views.task_detail, name="task-detail"),
    path("workflows/<str:workflow_id>/tasks/<str:task>/log/", views.task_log_download, name="task-log"),
    path("backends/", views.backend_list, name="backend-list"),
    path("pools/", views.pool_list, name="pool-list"),
    path("pools/<str:name>/", views.pool_detail, name="pool-detail"),
    path("submit/", views.submit, name="submit"),
    path("apps/", app_views.apps, name="app-list"),
    path("apps/<str:name>/", app_views.app_detail, name="app-detail"),
]
