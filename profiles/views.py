"""The profile page: the sections the surface apps registered, each with its own context."""
from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET

from .sections import all_sections


@login_required
@require_GET
def profile_page(request):
    rendered = []
    for section in all_sections():
        context = {"request": request, "user": request.user, **section.context(request)}
        rendered.append((section, render_to_string(section.template, context, request=request)))
    return render(request, "profiles/profile.html", {"sections": rendered})
