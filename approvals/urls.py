from django.urls import path

from . import views
from .models import DecidedVia

DASHBOARD = DecidedVia.DASHBOARD

app_name = "approvals"
urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("history/", views.history, name="history"),
    path("bulk/", views.bulk_decide, name="bulk"),
    path("group/", views.group_decide, name="group"),
    path("<int:approval_id>/snooze/", views.snooze_view, name="snooze"),
    path("<int:approval_id>/wake/", views.wake_view, name="wake"),
    # The same views for the chat's cards and the dashboard's rows: the route says which (decided_via).
    path("<int:approval_id>/", views.controls_view, name="controls"),
    path("<int:approval_id>/decide/", views.decide_view, name="decide"),
    path("<int:approval_id>/edit/", views.edit_view, name="edit"),
    path("<int:approval_id>/edit/title/", views.edit_title_view, name="edit_title"),
    path("<int:approval_id>/answer/", views.answer_view, name="answer"),
    path("<int:approval_id>/claim/", views.claim_view, name="claim"),
    path("<int:approval_id>/unclaim/", views.claim_view, {"release": True}, name="unclaim"),
    path("<int:approval_id>/extend/", views.extend_view, name="extend"),
    path("<int:approval_id>/ask-again/", views.ask_again_view, name="ask_again"),
    path("dashboard/<int:approval_id>/", views.controls_view, {"via": DASHBOARD}, name="dashboard_controls"),
    path("dashboard/<int:approval_id>/decide/", views.decide_view, {"via": DASHBOARD}, name="dashboard_decide"),
    path("dashboard/<int:approval_id>/edit/", views.edit_view, {"via": DASHBOARD}, name="dashboard_edit"),
    path("dashboard/<int:approval_id>/edit/title/", views.edit_title_view, {"via": DASHBOARD}, name="dashboard_edit_title"),
    path("dashboard/<int:approval_id>/answer/", views.answer_view, {"via": DASHBOARD}, name="dashboard_answer"),
    path("dashboard/<int:approval_id>/claim/", views.claim_view, {"via": DASHBOARD}, name="dashboard_claim"),
    path("dashboard/<int:approval_id>/unclaim/", views.claim_view, {"via": DASHBOARD, "release": True}, name="dashboard_unclaim"),
    path("dashboard/<int:approval_id>/extend/", views.extend_view, {"via": DASHBOARD}, name="dashboard_extend"),
    path("dashboard/<int:approval_id>/ask-again/", views.ask_again_view, {"via": DASHBOARD}, name="dashboard_ask_again"),
]
