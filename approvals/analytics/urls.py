"""The analytics page, mounted at /approvals/analytics/ (before approvals.urls, whose patterns are ids)."""
from django.urls import path

from . import views as analytics_views

app_name = "analytics"
urlpatterns = [path("", analytics_views.analytics_page, name="page")]
