"""The ATIF download in Chromium at desktop and phone widths: the export menu offers it and
the file it saves validates as ATIF v1.8."""

from __future__ import annotations

import json

import pytest
from atif import Trajectory

from tests.browser.conftest import SHOTS


@pytest.mark.parametrize("width", [1440, 390])
def test_download_a_route_as_atif(browser_page, demo, width, tmp_path):
    page, base = browser_page
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{base}/sessions/{demo.pk}/transcript/")
    page.locator(".export-menu summary").click()
    link = page.get_by_role("link", name="ATIF of this route")
    link.wait_for()
    page.screenshot(path=str(SHOTS / f"atif-menu-{width}.png"))
    with page.expect_download() as info:
        link.click()
    download = info.value
    assert download.suggested_filename.endswith(".atif.json")
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)
    doc = Trajectory.model_validate(json.loads(saved.read_text()))
    assert (
        doc.schema_version == "ATIF-v1.8" and doc.steps[-1].message == "The file says hello world."
    )
    assert not page.errors, page.errors
