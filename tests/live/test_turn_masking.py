"""Streamed answers are masked although a secret arrives split over several deltas: the
masker holds back what could still be a secret, and viewers never see one in clear."""

from __future__ import annotations

import json
import random

import pytest
from channels.db import database_sync_to_async

from explorer.secrets import redact_for_search
from explorer.session.providers import OpenAIChatProvider
from explorer.turns import StreamMasker
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.live.conftest import close_all
from tests.live.test_turns import collect_turn, viewer, wait_done
from tests.secrets.seeded import make_secrets

CONTEXTS = {
    "url-credentials": "clone https://deploy:{s}@git.example.com/x.git now",
    "generic-secret": 'set password = "{s}" in the env',
    "bearer-token": "curl -H 'Authorization: Bearer {s}' x",
    "basic-auth": "curl -H 'Authorization: Basic {s}' x",
    "aws-secret-key": "aws_secret_access_key = {s}\nok",
}


def answers() -> list[tuple[str, str, str]]:
    """(kind, secret, an answer holding it) for every kind the scanner finds there."""
    out = []
    for kind, secret in make_secrets().items():
        text = CONTEXTS.get(kind, "here is the value {s} done.").format(s=secret)
        if secret not in redact_for_search(text):
            out.append((kind, secret, text))
    return out


def streamed(text: str, sizes: random.Random) -> tuple[list[str], str]:
    masker = StreamMasker()
    deltas, i = [], 0
    while i < len(text):
        n = sizes.randint(1, 9)
        deltas.append(masker.feed(text[i : i + n]))
        i += n
    deltas.append(masker.feed("", final=True))
    return deltas, "".join(deltas)


def pieces(secret: str) -> list[str]:
    """Eight-character slices of the secret's own characters (a key block's header and
    footer are public words, not the secret)."""
    body = secret.split("-----")[2] if secret.startswith("-----BEGIN") else secret
    return [body[k : k + 8] for k in range(0, len(body) - 8, 3) if body[k : k + 8].strip()]


@pytest.mark.parametrize("kind,secret,text", answers(), ids=[a[0] for a in answers()])
def test_no_split_of_a_secret_reaches_the_stream(kind, secret, text):
    assert len(answers()) >= 15  # every kind of the seeded set is covered
    for seed in range(25):
        deltas, shown = streamed(text, random.Random(seed))
        assert f"[REDACTED:{kind}]" in shown
        for piece in pieces(secret):
            assert piece not in shown, (seed, piece)
        if kind != "private-key":  # a key block is masked line by line as it arrives
            assert shown == redact_for_search(text)  # the same masking as a stored entry


def test_plain_text_streams_word_by_word_and_loses_nothing():
    masker = StreamMasker()
    chunks = ["The ", "answer ", "is ", "forty-", "two", ".\n", "Done"]
    shown = [masker.feed(c) for c in chunks] + [masker.feed("", final=True)]
    assert shown == ["The ", "answer ", "is ", "", "", "forty-two.\n", "", "Done"]
    assert "".join(shown) == "".join(chunks)


def test_false_positives_stream_in_clear():
    from explorer.secrets import fingerprint

    secret = make_secrets()["github-token"]
    masker = StreamMasker(frozenset({fingerprint(secret, b"k")}), b"k")
    out = masker.feed(f"token {secret[:10]}") + masker.feed(secret[10:] + " ok")
    out += masker.feed("", final=True)
    assert out == f"token {secret} ok"


@pytest.fixture
def stored(make_session):
    return make_session()


@pytest.mark.django_db(transaction=True)
async def test_viewers_receive_the_split_token_masked(ws_connect, stored, viewer_user, editor_user):
    from explorer import turns

    token = make_secrets()["github-token"]
    chunks = ["Use ", "the ", "token ", token[:7], token[7:20], token[20:], " to ", "push."]
    with FakeOpenAIServer(Reply(chunks=chunks, delay=0.01)) as server:
        provider = OpenAIChatProvider(server.base_url, "fake-model")
        comm = await viewer(ws_connect, stored, viewer_user)
        turn = await database_sync_to_async(turns.start_turn)(
            stored, editor_user, "Which token?", provider=provider
        )
        seen = await collect_turn(comm)
        await wait_done(turn)
    deltas = [m for m in seen if m["type"] == "turn" and m["event"] == "delta"]
    shown = "".join(d["text"] for d in deltas)
    assert shown == "Use the token [REDACTED:github-token] to push."
    offsets = [d["offset"] for d in deltas]
    assert offsets == [sum(len(d["text"]) for d in deltas[:k]) for k in range(len(deltas))]
    assert turn.text == shown and turn.raw_text == "".join(chunks)
    frames = json.dumps(seen)
    for piece in pieces(token):
        assert piece not in frames
    await close_all([comm])
