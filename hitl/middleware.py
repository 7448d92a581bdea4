"""Project middleware."""
from django.http import JsonResponse


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
