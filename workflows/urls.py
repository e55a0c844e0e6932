from django.urls import path

from workflows import views

urlpatterns = [path("", views.dashboard, name="dashboard")]
