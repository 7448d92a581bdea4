from django.urls import path

from . import views

app_name = "chat"
urlpatterns = [
    path("", views.conversation_list, name="conversations"),
    path("conversations/new/", views.new_conversation, name="new"),
    path("conversations/<uuid:conversation_id>/", views.conversation_page, name="conversation"),
    path("conversations/<uuid:conversation_id>/messages/", views.post_message, name="post_message"),
    path("conversations/<uuid:conversation_id>/retry/", views.retry, name="retry"),
    path("conversations/<uuid:conversation_id>/approve-all/", views.approve_all, name="approve_all"),
    path("conversations/<uuid:conversation_id>/stop/", views.stop, name="stop"),
    path("tool-calls/<int:tool_call_id>/undo/", views.undo_call, name="undo"),
    # The dashboard's Stop: the route, not a form field, says the Stop came from the dashboard.
    path("conversations/<uuid:conversation_id>/stop/dashboard/", views.stop, {"via": "dashboard"}, name="dashboard_stop"),
]
