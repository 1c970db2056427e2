"""Integrity panel: what in this session's tree cannot be trusted, and where."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from explorer import queries
from explorer.agent_import import reading_rule_sections
from explorer.models import ImportProblem
from explorer.permissions import get_session_for_user, viewer_required
from explorer.views.common import HtmxHttpRequest, render_panel, resolve_cursor, session_frame
from explorer.views.jsonapi import json_page, plain, problem_rows, wants_json

TEMPLATE = "explorer/integrity.html"


def integrity_panel(session, *, with_tools: bool = False) -> dict[str, Any]:
    """One builder for the page and its partials: the engine's tree checks, the warnings the
    import reported, and (on request) tool results without their call.

    ``total`` is the JSON's figure; it is ``complete`` once the tool results are checked.
    Before that (the page loads the check in a request of its own) the page says the count
    so far, and the check's partial brings the whole count with it: the badge once said "no
    problems found" beside a JSON ``total`` of two tool results without calls."""
    # A Claude Code or Codex session adds what its format's reading rules found in the file.
    sections = [*queries.integrity_sections(session), *reading_rule_sections(session)]
    tools = queries.unmatched_tool_results(session) if with_tools else None
    return {
        "sections": sections,
        "tools": tools,
        "total": sum(len(s["items"]) for s in sections) + len(tools or []),
        "complete": tools is not None,
        "import_problems": list(ImportProblem.objects.filter(session=session)[:200]),
    }


@viewer_required
@require_GET
def integrity_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    ctx = session_frame(request, session, "integrity", cursor)
    with_tools = request.GET.get("section") == "tools"
    ctx.update(integrity_panel(session, with_tools=with_tools or wants_json(request)))
    if wants_json(request):
        problems = problem_rows(ctx["import_problems"])
        data = {k: ctx[k] for k in ("sections", "tools", "total")}
        return json_page(plain({**data, "import_problems": problems}))
    partial = "tool-results" if with_tools else "integrity-panel"
    # The check's partial replaces its own section: the count above it comes out of band.
    ctx["oob_total"] = with_tools and bool(request.htmx)
    return render_panel(request, TEMPLATE, partial, ctx)
