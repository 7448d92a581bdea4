from django.urls import path

from approvals.models import Approval

from . import views

app_name = "stepup"
urlpatterns = [
    path("passkeys/options/", views.registration_options, name="registration_options"),
    path("passkeys/", views.register, name="register"),
    path("passkeys/<int:passkey_id>/remove/", views.remove, name="remove"),
    path("approvals/<int:approval_id>/options/", views.approval_options, name="approval_options"),
    # The surface a passkey approval is recorded as is the route's, never the client's word.
    path("approvals/<int:approval_id>/approve/", views.approve, {"via": Approval.Via.CHAT}, name="approve"),
    path("dashboard/approvals/<int:approval_id>/approve/", views.approve, {"via": Approval.Via.DASHBOARD}, name="dashboard_approve"),
]
