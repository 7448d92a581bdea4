from django.urls import path

from . import views

app_name = "stepup"
urlpatterns = [
    path("passkeys/options/", views.registration_options, name="registration_options"),
    path("passkeys/", views.register, name="register"),
    path("passkeys/<int:passkey_id>/remove/", views.remove, name="remove"),
    path("approvals/<int:approval_id>/options/", views.approval_options, name="approval_options"),
    path("approvals/<int:approval_id>/approve/", views.approve, name="approve"),
]
