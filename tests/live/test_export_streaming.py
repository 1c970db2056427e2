"""The HTML export streams for real under daphne: its head reaches the client while the
rest is still being made (see ``gated_asgi``), and the whole file then follows."""

from __future__ import annotations

import http.client
import sys

from tests.live.server import LiveServer


class GatedServer(LiveServer):
    def _commands(self) -> list[list[str]]:
        return [
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port),
             "tests.live.gated_asgi:application"]
        ]  # fmt: skip


def test_the_export_sends_its_head_before_the_rest_is_made(tmp_path, small_session_file):
    gate = tmp_path / "gate"
    with GatedServer(
        tmp_path / "site", sessions=[str(small_session_file)], env={"EXPORT_GATE": str(gate)}
    ) as server:
        pk = server.session_pks[0]
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        conn.request(
            "GET",
            f"/sessions/{pk}/export.html?scope=tree",
            headers={"Cookie": server.cookie("vera")},
        )
        response = conn.getresponse()
        assert response.status == 200
        assert response.getheader("Content-Disposition", "").startswith("attachment;")
        # the head arrives while the server still waits for the gate: the rows are not made
        # (a read that blocks here until the 60 s socket timeout means nothing was sent)
        first = ""
        while "</main>" not in first:
            chunk = response.read1(1 << 16)
            assert chunk, "the response ended inside its head"
            first += chunk.decode()
        assert "<header" in first and "Search this file" in first
        assert 'class="x-rows"' not in first and "</html>" not in first
        gate.touch()
        rest = response.read().decode()
        conn.close()
        body = first + rest
        assert body.rstrip().endswith("</html>")
        assert 'class="x-rows"' in body and "Demo of a small session" in body
