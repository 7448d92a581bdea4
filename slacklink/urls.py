from django.urls import path

from . import views

app_name = "slacklink"

urlpatterns = [
    path("commands/", views.slash_command, name="commands"),
    path("interactions/", views.interaction, name="interactions"),
    path("events/", views.event, name="events"),
    path("code/", views.new_code, name="code"),
    path("unlink/", views.unlink, name="unlink"),
]
