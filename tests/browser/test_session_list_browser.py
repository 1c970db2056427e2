"""The session list in Chromium at desktop and phone widths: unnamed sessions told apart,
every group's table within the page, no sideways scrolling on a phone."""

from __future__ import annotations

import json
import os

from explorer import services
from tests.browser.conftest import SHOTS

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs a loop


def _unnamed(n: int) -> bytes:
    sid = f"019b76ea-0000-7000-8000-{n:012d}"
    header = {"type": "session", "version": 3, "id": sid, "timestamp": f"2025-03-0{n % 9 + 1}T05:06:07.089Z",
              "cwd": "/home/ana/projects/a-rather-long-working-directory-name/for-the-layout"}  # fmt: skip
    text = f"Session {n}: refactor the loader so that very long first messages " + "wrap " * 30
    user = {"type": "message", "id": "u1", "parentId": None, "timestamp": header["timestamp"],
            "message": {"role": "user", "content": text, "timestamp": 1741064768000}}  # fmt: skip
    return (json.dumps(header) + "\n" + json.dumps(user) + "\n").encode()


def test_the_session_list_fits_desktop_and_phone(browser_page):
    from tests.conftest import SMALL_SESSION

    page, base = browser_page
    original = services.import_bytes(
        SMALL_SESSION, source_path="/pi/--proj--/orig.jsonl", user=None
    )
    services.rename_session(original.session, None, "The original")
    services.fork_session(original.session, None)
    for n in range(6):
        path = f"/home/ana/.pi/agent/sessions/--home-ana--/2025-03-0{n + 1}T05-06-07-089Z_019b76ea-{n}.jsonl"
        assert services.import_bytes(_unnamed(n), source_path=path, user=None).ok
    for width, name in ((1440, "session-list-1440.png"), (390, "session-list-390.png")):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{base}/")
        page.screenshot(path=str(SHOTS / name), full_page=True)
        # No table is wider than the page, and the page does not scroll sideways.
        widest = page.eval_on_selector_all(
            "table.session-table", "ts => Math.max(...ts.map(t => t.getBoundingClientRect().width))"
        )
        assert widest <= width, (width, widest)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        # The unnamed sessions are told apart by file name and first message.
        assert page.locator("text=_019b76ea-3.jsonl").count() == 1
        assert page.locator(".s-name .unnamed", has_text="Session 4: refactor").count() == 1
        assert page.locator(".badge.fork", has_text="fork of orig.jsonl").count() == 1
    assert page.errors == []
