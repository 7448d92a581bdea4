from django.urls import path

from . import views

app_name = "pushlink"

urlpatterns = [
    path("sw.js", views.service_worker, name="service-worker"),
    path("push/subscriptions", views.subscriptions_view, name="subscriptions"),
    path("push/subscriptions/<int:pk>/remove", views.remove, name="remove"),
    path("push/decide", views.decide, name="decide"),
    path("push/reject/", views.reject, name="reject"),
    path("push/reject/call", views.reject_call, name="reject-call"),
    path("push/extend", views.extend, name="extend"),
]
