from django.urls import path

from . import views

app_name = "approvals"
urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("history/", views.history, name="history"),
    path("bulk/", views.bulk_decide, name="bulk"),
    path("<int:approval_id>/decide/", views.decide_view, name="decide"),
]
