from django.urls import path

from . import views

app_name = "emaillink"

urlpatterns = [
    path("approve/<str:token>/", views.approve_page, name="approve"),
    path("email/preference/", views.preference, name="preference"),
]
