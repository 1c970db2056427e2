"""An expected 403 is one log line, not a traceback."""

from __future__ import annotations

import logging

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_a_refused_request_logs_one_line_without_a_traceback(viewer_client, make_session, caplog):
    session = make_session()
    with caplog.at_level(logging.INFO, logger="django.request"):
        response = viewer_client.post(
            reverse("explorer:live_turn", args=[session.pk]), {"text": "hi"}
        )
    assert response.status_code == 403
    records = [r for r in caplog.records if r.name == "django.request"]
    assert len(records) == 1
    assert records[0].levelno == logging.WARNING and "Forbidden" in records[0].getMessage()
    assert records[0].exc_info is None
    assert "Traceback" not in caplog.text


def test_a_real_error_keeps_its_traceback():
    """The filter touches PermissionDenied only: other exceptions keep their traceback."""
    logger = logging.getLogger("django.request")
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    logger.addHandler(handler)
    try:
        try:
            raise ValueError("boom")
        except ValueError as exc:
            logger.error("Internal Server Error: /x", exc_info=exc)
    finally:
        logger.removeHandler(handler)
    assert records and records[0].exc_info is not None and records[0].exc_info[0] is ValueError
