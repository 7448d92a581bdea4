"""Project middleware."""
import logging

from django.db import DatabaseError
from django.http import HttpResponse, JsonResponse
from django.utils.html import escape

logger = logging.getLogger(__name__)

DATABASE_UNAVAILABLE = "The database cannot be reached for a moment (it may be restarting). Nothing was lost: try again in a few seconds."
DATABASE_RETRY_SECONDS = 5


class DatabaseUnavailable:
    """A page whose view meets a database that is down (restarting, out of connections) answers
    503 with Retry-After and says so, never a 500 (the JSON API answers the same: hitl.api). The
    page is plain HTML on purpose: the site's base template reads the database too."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, DatabaseError):
            return None
        logger.warning("%s %s: the database is unavailable: %s", request.method, request.path, exception)
        if request.path.startswith("/api/"):
            response = JsonResponse({"detail": DATABASE_UNAVAILABLE}, status=503)
        else:
            response = HttpResponse(
                '<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">'
                "<title>Try again in a moment</title></head><body><main><h1>Try again in a moment</h1>"
                f"<p>{escape(DATABASE_UNAVAILABLE)}</p><p><a href=\"\">Reload this page</a></p></main></body></html>",
                status=503,
            )
        response["Retry-After"] = str(DATABASE_RETRY_SECONDS)
        return response


class JsonApiMethodNotAllowed:
    """django-ninja answers a method a path lacks with a plain-text 405; the API promises JSON
    errors with `detail`, so give it one (the Allow header is kept)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.status_code == 405 and request.path.startswith("/api/"):
            json_response = JsonResponse({"detail": f"Method {request.method} is not allowed here."}, status=405)
            json_response["Allow"] = response.get("Allow", "")
            return json_response
        return response
