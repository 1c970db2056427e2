"""The icon browsers ask for by themselves: ``/favicon.ico`` leads to the pages' own icon,
for anyone (no login), instead of a 404 in the console of every JSON or SVG opened alone."""

from __future__ import annotations

import re

from django.contrib.staticfiles import finders


def test_favicon_ico_leads_to_the_pages_icon(client, viewer_client, db):
    answer = client.get("/favicon.ico")  # not logged in: no detour through the login page
    assert answer.status_code == 301
    target = answer["Location"]
    assert re.search(r"/explorer/favicon(\.[0-9a-f]+)?\.svg$", target), target
    assert finders.find("explorer/favicon.svg")
    page = viewer_client.get("/").content.decode()
    icon = re.search(r'<link rel="icon" type="image/svg\+xml" href="([^"]+)"', page)
    assert icon and icon.group(1) == target  # the same file as the pages name
