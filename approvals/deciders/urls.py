"""The delegations page, mounted at /approvals/delegations/ (before approvals.urls, whose patterns are ids)."""
from django.urls import path

from . import views as delegation_views

app_name = "delegations"
urlpatterns = [
    path("", delegation_views.delegations_page, name="page"),
    path("new/", delegation_views.create_delegation, name="create"),
    path("<int:delegation_id>/end/", delegation_views.end_delegation, name="end"),
]
