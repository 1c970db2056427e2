"""Each rule finds its format in the shapes transcripts hold it in, and leaves ordinary code,
logs and placeholders alone."""

from __future__ import annotations

import random
import string

import pytest

from explorer.secrets import RULES, scan_text
from explorer.secrets.rules import looks_random, secretish_name, shannon_entropy

from .seeded import make_secrets

S = make_secrets(41)
_rnd = random.Random(7)
PYPI = "pypi-AgEIcHlwaS5vcmc" + "".join(
    _rnd.choice(string.ascii_letters + string.digits) for _ in range(70)
)


def _r(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(_rnd.choice(alphabet) for _ in range(n))


OPENROUTER = "sk-or-v1-" + _r(64, "0123456789abcdef")
XAI = "xai-" + _r(80)
GROQ = "gsk_" + _r(52)
SENDGRID = "SG." + _r(22) + "." + _r(43)
DIGITALOCEAN = "dop_v1_" + _r(64, "0123456789abcdef")
AGE = "AGE-SECRET-KEY-1" + _r(58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L")

# (kind, text, the secret inside it)
POSITIVE = [
    ("aws-access-key", f'{{"AccessKeyId": "{S["aws-access-key"]}"}}', S["aws-access-key"]),
    ("aws-access-key", f"export AWS_ACCESS_KEY_ID={S['aws-access-key']}", S["aws-access-key"]),
    ("aws-secret-key", f'AWS_SECRET_ACCESS_KEY="{S["aws-secret-key"]}"', S["aws-secret-key"]),
    ("aws-secret-key", f'"aws_secret_access_key": "{S["aws-secret-key"]}",', S["aws-secret-key"]),
    ("github-token", f"git clone https://{S['github-token']}@github.com/o/r", S["github-token"]),
    ("github-token", f"GH_TOKEN={S['github-token']}", S["github-token"]),
    ("gitlab-token", f"PRIVATE-TOKEN: {S['gitlab-token']}", S["gitlab-token"]),
    ("openai-api-key", f"OPENAI_API_KEY={S['openai-api-key']}", S["openai-api-key"]),
    ("anthropic-api-key", f"x-api-key: {S['anthropic-api-key']}", S["anthropic-api-key"]),
    ("slack-token", f"token={S['slack-token']}&channel=C1", S["slack-token"]),
    ("slack-webhook", f"curl -X POST {S['slack-webhook']} -d '{{}}'", S["slack-webhook"]),
    ("stripe-key", f"stripe.api_key = '{S['stripe-key']}'", S["stripe-key"]),
    (
        "google-api-key",
        f"https://maps.googleapis.com/api?key={S['google-api-key']}&q=x",
        S["google-api-key"],
    ),
    ("private-key", f"$ cat key.pem\n{S['private-key']}\n$ ", S["private-key"]),
    ("jwt", f"Cookie: session={S['jwt']}; Path=/", S["jwt"]),
    (
        "url-credentials",
        f"DATABASE_URL=postgres://app:{S['url-credentials']}@db:5432/app",
        S["url-credentials"],
    ),
    (
        "url-credentials",
        f"redis://default:{S['url-credentials']}@cache.internal:6379",
        S["url-credentials"],
    ),
    ("bearer-token", f"Authorization: Bearer {S['bearer-token']}", S["bearer-token"]),
    ("generic-secret", f'client_secret = "{S["generic-secret"]}"', S["generic-secret"]),
    ("generic-secret", f"DB_PASSWORD={S['generic-secret']}", S["generic-secret"]),
    ("generic-secret", f'{{"apiKey": "{S["generic-secret"]}"}}', S["generic-secret"]),
    ("generic-secret", f"  auth_token: '{S['generic-secret']}'", S["generic-secret"]),
    ("generic-secret", f"mysql --password={S['generic-secret']} -u root", S["generic-secret"]),
    # JSON inside a JSON string, as a tool result holding an API response dump shows it
    (
        "generic-secret",
        '{\\"client_secret\\": \\"' + S["generic-secret"] + '\\"}',
        S["generic-secret"],
    ),
    ("generic-secret", f"vercel deploy --token {S['generic-secret']} --prod", S["generic-secret"]),
    ("generic-secret", f'cli login --api-key "{S["generic-secret"]}"', S["generic-secret"]),
    ("huggingface-token", f"HF_TOKEN={S['huggingface-token']}", S["huggingface-token"]),
    ("npm-token", f"//registry.npmjs.org/:_authToken={S['npm-token']}", S["npm-token"]),
    ("pypi-token", f"password = {PYPI}", PYPI),
    ("basic-auth", f"-H 'Authorization: Basic {S['basic-auth']}'", S["basic-auth"]),
    ("openrouter-api-key", f"OPENROUTER_API_KEY={OPENROUTER}", OPENROUTER),
    ("xai-api-key", f'"apiKey": "{XAI}"', XAI),
    ("groq-api-key", f"export GROQ_API_KEY='{GROQ}'", GROQ),
    ("sendgrid-api-key", f"sg.client = SendGridAPIClient({SENDGRID!r})", SENDGRID),
    ("digitalocean-token", f"doctl auth init -t {DIGITALOCEAN}", DIGITALOCEAN),
    ("age-secret-key", f"# created: 2025-01-01\n{AGE}\n", AGE),
]


@pytest.mark.parametrize(
    ("kind", "text", "secret"), POSITIVE, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(POSITIVE)]
)
def test_rule_finds_the_secret_exactly(kind, text, secret):
    matches = scan_text(text)
    assert [(m.kind, text[m.start : m.end]) for m in matches] == [(kind, secret)]


def test_every_rule_has_a_positive_case():
    assert {k for k, _, _ in POSITIVE} == {rule.kind for rule in RULES}


def test_private_key_without_end_line_is_still_masked():
    body = "\n".join(S["private-key"].split("\n")[1:4])
    text = "-----BEGIN RSA PRIVATE KEY-----\n" + body + "\n[output truncated]"
    (m,) = scan_text(text)
    assert m.kind == "private-key"
    assert body in text[m.start : m.end]


def test_private_key_with_escaped_newlines_in_a_command():
    lines = S["private-key"].split("\n")
    text = "printf '" + "\\n".join(lines) + "' > id_ed25519"
    (m,) = scan_text(text)
    assert m.kind == "private-key" and text[m.start : m.end] == "\\n".join(lines)


def test_offsets_are_code_points_after_non_ascii_text():
    text = "İstanbul ✓ — " + S["github-token"] + " ok"
    (m,) = scan_text(text)
    assert text[m.start : m.end] == S["github-token"]


def test_two_secrets_in_one_string_and_vendor_beats_generic():
    text = f"API_KEY={S['openai-api-key']} and GH={S['github-token']}"
    assert [(m.kind, text[m.start : m.end]) for m in scan_text(text)] == [
        ("openai-api-key", S["openai-api-key"]),
        ("github-token", S["github-token"]),
    ]


NEGATIVE = [
    "max_tokens = 4096",
    '"usage": {"input": 1200, "totalTokens": 123456789012}',
    'tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased-finetuned")',
    "password = getpass.getpass()",
    'api_key = os.environ["OPENAI_API_KEY"]',
    "secret_key = settings.SECRET_KEY_FALLBACKS",
    'token_url = "https://oauth.example.com/oauth2/token"',
    'SECRET_KEY = "django-insecure-change-me-in-production-please"',
    'password: "${DATABASE_PASSWORD_FROM_VAULT}"',
    'api_key = "<your-api-key-goes-here-1234>"',
    "api_key = 'sk-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",
    '"id": "0195f3a2-7c41-7d2e-9b1a-3c5d7e9f1a2b", "parentId": "a1b2c3d4"',
    "git@github.com:someone/some-repository.git",
    "ssh://git@gitlab.example.com:2222/group/project.git",
    "see http://user:password@example.com/ for the format",
    "proxy http://proxy.corp:3128@gateway",
    "pip install scikit-learn sk-video task-runner",
    "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----",
    'if line.startswith("-----BEGIN RSA PRIVATE KEY-----"):',
    "token_count: 1234567890, keyboard_layout: us-international-altgr",
    "headers:x,withCredentials:i.credentials||S.credentials||Y.config.withCredentials",
    "password_hash = make_password(raw_password_from_form)",
    "key = lambda entry: (entry.timestamp, entry.identifier)",
    "self.assertEqual(token, expected_token_value_abc)",
    "ghp_short and AKIA12 and AIza-too-short",
    "Authorization: Bearer <token>",
    "docker login --password-stdin registry.example.com/team/project",
    "tool --token-file /home/user/.config/tool/token.json --verbose",
    "run with --secret-name production-database-credentials-v2",
    "the --token flag takes abcdefghijklmnop as its value",
    "Basic authentication: Basic dXNlcm5hbWU= is only a user name",
    "eyJhbGciOiJIUzI1NiJ9 alone is only a header",
]


@pytest.mark.parametrize("text", NEGATIVE)
def test_ordinary_text_is_not_a_secret(text):
    assert scan_text(text) == []


def test_entropy_and_name_filters():
    assert shannon_entropy("aaaaaaaa") == 0
    assert shannon_entropy(S["generic-secret"]) > 4
    assert looks_random(S["generic-secret"])
    for value in (
        "password123",
        "snake_case_identifier_name",
        "1234567890123",
        "/home/user/.ssh/id_rsa",
        "xxxxxxxxxxxxxxxx",
    ):
        assert not looks_random(value), value
    for name in ("api_key", "DB_PASSWORD", "clientSecret", "X-Api-Key", "authToken", "aws_secret"):
        assert secretish_name(name), name
    for name in (
        "max_tokens",
        "token_count",
        "secret_name",
        "keyboard",
        "password_reset",
        "tokenizer",
    ):
        assert not secretish_name(name), name


@pytest.mark.parametrize(
    ("alphabet", "length", "floor"),
    [
        (string.ascii_letters + string.digits, 24, 0.97),
        (string.ascii_letters + string.digits, 40, 0.99),
        (string.ascii_lowercase + string.digits, 32, 0.97),
        (string.ascii_letters + string.digits + "+/", 40, 0.97),
        (string.ascii_letters + string.digits + "_-", 40, 0.95),
        ("0123456789abcdef", 40, 0.99),
    ],
)
def test_entropy_rule_catches_nearly_all_random_values(alphabet, length, floor):
    # seeded, so the rate is the same on every run; the floor records the recall we measured
    rnd = random.Random(length * 31 + len(alphabet))
    values = ["".join(rnd.choice(alphabet) for _ in range(length)) for _ in range(400)]
    found = sum(1 for v in values if scan_text(f'client_secret = "{v}"'))
    assert found / len(values) >= floor


def test_truncated_private_key_keeps_the_text_after_it():
    body = "MIIEpAIBAAKCAQEAn" + "x" * 40 + "n\nABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdrn"
    text = "-----BEGIN EC PRIVATE KEY-----\n" + body + "\n\n[truncated]"
    (m,) = scan_text(text)
    assert text[m.start : m.end] == "-----BEGIN EC PRIVATE KEY-----\n" + body
    escaped = "-----BEGIN EC PRIVATE KEY-----\\n" + body.replace("\n", "\\n") + "\\n' | ssh-add -"
    (m,) = scan_text(escaped)
    assert escaped[m.end :] == "\\n' | ssh-add -"


def test_many_key_headers_are_found_separately():
    block = "-----BEGIN PRIVATE KEY-----\n" + "A1b2C3d4" * 8 + "\n"
    text = "\n".join([block] * 50)
    matches = scan_text(text)
    assert len(matches) == 50 and all(m.kind == "private-key" for m in matches)
