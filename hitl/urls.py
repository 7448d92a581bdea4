from django.contrib import admin
from django.urls import include, path

from .api import api

urlpatterns = [
    path("", include("chat.urls")),
    path("approvals/analytics/", include("approvals.analytics.urls")),
    path("approvals/delegations/", include("approvals.deciders.urls")),
    path("approvals/", include("approvals.urls")),
    path("rules/", include("approvals.policy.urls")),
    path("telegram/", include("telegramlink.urls")),
    path("slack/", include("slacklink.urls")),
    path("profile/", include("profiles.urls")),
    path("", include("emaillink.urls")),
    path("", include("pushlink.urls")),
    path("stepup/", include("stepup.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
]
