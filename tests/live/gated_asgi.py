"""The site's ASGI application with the HTML export held after its head until a file
exists (``EXPORT_GATE``): served by daphne in ``test_export_streaming``, it shows whether the
head reaches the client while the rest is still being made. Were the response collected
whole before sending (what Django does with a sync iterator under ASGI), the head would
never arrive and the client's read would time out."""

from __future__ import annotations

import os
import time
from pathlib import Path

from sessions_site.asgi import application  # noqa: F401 (what daphne serves)


def _install() -> None:
    """Wrap the export's stream (imported here: Django is set up by the line above)."""
    from explorer import export_html

    stream = export_html.stream

    def gated_stream(*args, **kwargs):
        gate = Path(os.environ["EXPORT_GATE"])
        parts = stream(*args, **kwargs)
        yield next(parts)  # the head
        deadline = time.monotonic() + 300  # never forever, should the test have died
        while not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        yield from parts

    export_html.stream = gated_stream


_install()
