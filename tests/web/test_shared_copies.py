"""Shared copies of kept figures are written after the answer, never over a cleared cache.

`queries.grown` shares each whole-session figure through the cache for the other workers;
`explorer.shared_copies` writes those megabytes on its own thread. These tests hold that
thread back (a value that cannot be pickled until the test says so) to pin what must stay
true: the request that built a figure does not wait for its copy, the process trusts its
own copy meanwhile, another worker gets the copy once written, and a copy made before a
cache clear is not written after it.
"""

from __future__ import annotations

import threading

import pytest
from django.core.cache import cache
from django.urls import reverse

from explorer import queries, shared_copies

pytestmark = pytest.mark.django_db


class _Held:
    """A value whose pickling waits for ``gate``: the writer thread stops at it."""

    def __init__(self, gate: threading.Event, reached: threading.Event) -> None:
        self.gate, self.reached = gate, reached

    def __reduce__(self):
        self.reached.set()
        assert self.gate.wait(10)
        return (str, ("held",))


@pytest.fixture
def held_writer():
    """The writer thread, stopped at a value of its own until the test lets it go (within
    the test: the suite waits for the writer before the fixtures are torn down)."""
    gate, reached = threading.Event(), threading.Event()
    stamp_key = "test-shared-copies:held:stamp"
    cache.set(stamp_key, "s")
    shared_copies.write_later(
        "test-shared-copies:held", _Held(gate, reached), 60, stamp_key=stamp_key, stamp="s"
    )
    assert reached.wait(10)
    try:
        yield gate
    finally:
        gate.set()
        assert shared_copies.flush(10)


def _probe(session, builds: list[int]):
    def build(last: int) -> list[int]:
        builds.append(last)
        return [last]

    return queries.grown(session, "copies-probe", build, lambda v, a, last: [*v, last])


def test_a_figure_is_used_at_once_and_shared_once_written(make_session, held_writer):
    session = make_session()
    cache.clear()
    queries._GROWN.clear()
    builds: list[int] = []
    key = queries._identity_key(session, "grown|copies-probe")
    value = _probe(session, builds)
    assert len(builds) == 1
    assert cache.get(key) is None  # not written yet: the writer is held
    assert _probe(session, builds) == value and len(builds) == 1  # this process's own copy
    held_writer.set()
    assert shared_copies.flush(10)
    stamp, upto, shared = cache.get(key)
    assert shared == value and stamp == cache.get(key + ":stamp")
    queries._GROWN.clear()  # another worker: the shared copy, no build
    assert _probe(session, builds) == value and len(builds) == 1


def test_a_copy_made_before_a_clear_is_not_written_after_it(make_session, held_writer):
    session = make_session()
    cache.clear()
    queries._GROWN.clear()
    builds: list[int] = []
    key = queries._identity_key(session, "grown|copies-probe")
    _probe(session, builds)
    cache.clear()  # while the copy waits in the queue
    held_writer.set()
    assert shared_copies.flush(10)
    assert cache.get(key) is None and cache.get(key + ":stamp") is None
    _probe(session, builds)
    assert len(builds) == 2  # the clear forgot it: built again


def test_the_integrity_page_answers_before_its_findings_are_shared(
    make_session, viewer_client, held_writer
):
    session = make_session()
    cache.clear()
    queries._GROWN.clear()
    key = queries._identity_key(session, "grown|integrity-findings")
    response = viewer_client.get(reverse("explorer:integrity", args=[session.pk]))
    assert response.status_code == 200
    assert cache.get(key) is None  # the page did not wait for the writer
    held_writer.set()
    assert shared_copies.flush(10)
    stamp, _upto, findings = cache.get(key)
    assert stamp == cache.get(key + ":stamp")
    assert findings.entries == queries._GROWN[key].value.entries


def test_a_rendered_fragment_is_written_after_the_answer_and_not_over_a_clear(held_writer):
    builds: list[str] = []

    def build() -> str:
        builds.append("built")
        return "<p>kept</p>"

    cache.clear()
    assert queries._through_cache("test-shared-copies:fragment", build) == "<p>kept</p>"
    assert cache.get("test-shared-copies:fragment") is None  # queued, not written yet
    # Asked again meanwhile: the queued copy, not a second build.
    assert queries._through_cache("test-shared-copies:fragment", build) == "<p>kept</p>"
    assert builds == ["built"]
    cache.clear()  # before the writer gets to it: dropped
    held_writer.set()
    assert shared_copies.flush(10)
    assert cache.get("test-shared-copies:fragment") is None
    queries._through_cache("test-shared-copies:fragment", build)
    assert builds == ["built", "built"]
    assert shared_copies.flush(10)
    assert cache.get("test-shared-copies:fragment") == "<p>kept</p>"


def test_other_values_are_written_at_once(held_writer):
    """A caller may change a dict it was handed: it is pickled before the answer goes."""
    cache.clear()
    value = queries._through_cache("test-shared-copies:dict", lambda: {"n": 1})
    value["n"] = 2
    assert cache.get("test-shared-copies:dict") == {"n": 1}
    held_writer.set()


def test_a_cache_that_stops_answering_cannot_fill_the_queue(held_writer, monkeypatch):
    monkeypatch.setattr(shared_copies, "MAX_PENDING", 5)
    dropped = shared_copies._writer.dropped
    for k in range(12):
        shared_copies.write_later(f"test-shared-copies:n{k}", "v", 60, stamp_key="s", stamp="s")
    assert len(shared_copies._writer.pending) == 5
    assert shared_copies._writer.dropped - dropped == 7
    assert shared_copies.waiting("test-shared-copies:n11") == "v"  # the newest are kept
    assert shared_copies.waiting("test-shared-copies:n0") is None
    held_writer.set()
