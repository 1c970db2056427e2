"""A small asyncio WebSocket client (RFC 6455) for tests and benchmarks against daphne.

Only what the live page needs: text frames, fragmented messages, ping/pong and close codes.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import struct
from urllib.parse import urlsplit


class HandshakeRefused(Exception):
    def __init__(self, status: int, head: str) -> None:
        super().__init__(f"websocket handshake refused with HTTP {status}")
        self.status = status
        self.head = head


class WSClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.close_code: int | None = None

    @classmethod
    async def connect(
        cls, url: str, *, origin: str | None = None, cookie: str | None = None, timeout: float = 10
    ) -> WSClient:
        parts = urlsplit(url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, limit=2**24), timeout
        )
        key = base64.b64encode(os.urandom(16)).decode()
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        lines = [
            f"GET {path} HTTP/1.1",
            f"Host: {host}:{port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
        ]
        if origin:
            lines.append(f"Origin: {origin}")
        if cookie:
            lines.append(f"Cookie: {cookie}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await writer.drain()
        head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)).decode("latin-1")
        status = int(head.split(" ", 2)[1])
        if status != 101:
            writer.close()
            raise HandshakeRefused(status, head)
        return cls(reader, writer)

    async def send(self, text: str) -> None:
        await self._frame(0x1, text.encode("utf-8"))

    async def _frame(self, opcode: int, payload: bytes) -> None:
        header = bytearray([0x80 | opcode])
        n = len(payload)
        if n < 126:
            header.append(0x80 | n)
        elif n < 65536:
            header.append(0x80 | 126)
            header += struct.pack("!H", n)
        else:
            header.append(0x80 | 127)
            header += struct.pack("!Q", n)
        mask = os.urandom(4)
        header += mask
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.writer.write(bytes(header) + masked)
        await self.writer.drain()

    async def recv(self, timeout: float | None = None) -> str | None:
        """The next text message, or None once the server closed (see ``close_code``)."""
        return await asyncio.wait_for(self._recv(), timeout) if timeout else await self._recv()

    async def _recv(self) -> str | None:
        parts: list[bytes] = []
        while True:
            try:
                b1, b2 = await self.reader.readexactly(2)
            except asyncio.IncompleteReadError:
                self.close_code = self.close_code or 1006
                return None
            opcode = b1 & 0x0F
            n = b2 & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", await self.reader.readexactly(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", await self.reader.readexactly(8))
            payload = await self.reader.readexactly(n) if n else b""
            if opcode == 0x8:  # close
                self.close_code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                with contextlib.suppress(ConnectionError, RuntimeError):
                    await self._frame(0x8, payload[:2])
                return None
            if opcode == 0x9:  # ping
                await self._frame(0xA, payload)
                continue
            if opcode == 0xA:
                continue
            parts.append(payload)
            if b1 & 0x80:
                return b"".join(parts).decode("utf-8")

    async def close(self) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self._frame(0x8, struct.pack("!H", 1000))
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()


async def json_viewer(server, pk: int, user: str = "vera") -> WSClient:
    """A logged-in viewer of session ``pk`` on a running ``LiveServer``, in the JSON format,
    connected from now on (it has said ``resume`` and heard ``resumed``)."""
    import json

    ws = await WSClient.connect(
        f"{server.ws_base}/ws/sessions/{pk}/?format=json",
        origin=server.base_url,
        cookie=server.cookie(user),
    )
    await ws.send(json.dumps({"type": "resume", "after": "now"}))
    while json.loads(await ws.recv(timeout=30))["type"] != "resumed":
        pass
    return ws
