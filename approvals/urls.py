from django.urls import path

from . import views

app_name = "approvals"
urlpatterns = [
    path("<int:approval_id>/decide/", views.decide_view, name="decide"),
]
