from django.urls import path

from . import views

app_name = "telegramlink"

urlpatterns = [
    path("", views.telegram_page, name="page"),
    path("code/", views.new_code, name="code"),
    path("unlink/", views.unlink, name="unlink"),
    path("webhook/<str:secret>/", views.webhook, name="webhook"),
]
