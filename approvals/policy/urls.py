"""The rules page and its POSTs (a new rule, simulated or saved; enable; delete; promote a shadow rule), mounted at /rules/."""
from django.urls import path

from . import views as rule_views

app_name = "rules"
urlpatterns = [
    path("", rule_views.rules_page, name="page"),
    path("new/", rule_views.rule_new, name="new"),
    path("<int:rule_id>/enabled/", rule_views.rule_enable, name="enabled"),
    path("<int:rule_id>/delete/", rule_views.rule_delete, name="delete"),
    path("<int:rule_id>/promote/", rule_views.rule_promote, name="promote"),
]
