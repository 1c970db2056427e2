"""``?format=json`` on the pages: the same builder's data as the page, as JSON.

Read-only, behind the same login and roles as the page (the view's decorators run first).
Values are plain data from the builders; anything else (a date, a tuple) is made JSON here,
so ``None`` is always ``null``.
"""

from __future__ import annotations

from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, JsonResponse


def wants_json(request: HttpRequest) -> bool:
    """The caller asked for the page's data rather than its HTML."""
    return request.GET.get("format") == "json"


def json_page(data: dict[str, Any], *, status: int = 200) -> JsonResponse:
    """One page's data as a JSON object (never HTML, never Python reprs)."""
    response = JsonResponse(
        data, status=status, encoder=DjangoJSONEncoder, json_dumps_params={"ensure_ascii": False}
    )
    response["Vary"] = "HX-Request"
    return response
