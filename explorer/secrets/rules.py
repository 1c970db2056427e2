"""The detection rules: vendor token formats plus one entropy rule for secret-ish assignments.

Why our own rules rather than a package: detect-secrets 1.5.0 (the maintained Python
scanner, last released 2024) was measured on this machine on 0.36 MB of the standard
library: 0.06 MB/s through its ad-hoc `scan_line` API (0.2 MB/s calling its plugins
directly), with 41,000 findings from its eager entropy plugins. It reports no offsets
(masking would have to search for the value again), reports only the `ghp` prefix group
for GitHub tokens (the token itself would stay in clear), has no Anthropic, Google API key,
Hugging Face or other model-provider rule, and pulls in `requests` and `PyYAML`. No
dependency is added. The vendor formats are public facts (the prefixes the vendors
document, as also collected in gitleaks' default rule set); the patterns are written for
this project. Compared with gitleaks' defaults we cover the formats an agent transcript is
likely to hold (cloud, forge, model-provider, chat, payment and package-registry tokens,
key blocks, JWTs, URL and Basic credentials) and leave out its long tail of rarer vendors
and its per-vendor "name near a value" rules, which the one generic entropy rule replaces.

Each rule has lower-case literal keywords, one of which must occur in the text before its
regular expression runs. All keywords of all rules are found in one pass by an
Aho-Corasick automaton (`ahocorasick-rs`, pinned in pyproject.toml: about ten times
faster than one substring test per keyword, which had been the larger part of a scan;
`bench_secrets.py` measures both). Every
pattern is bounded, so scanning stays linear in the text; see `benchmarks/RESULTS.md`.

Bump `RULES_VERSION` whenever a rule, a keyword list or a filter changes: findings store
the version they were made with, and a stored finding with another version means "rescan".
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "RULES",
    "RULES_VERSION",
    "Rule",
    "looks_random",
    "secretish_name",
    "shannon_entropy",
]

RULES_VERSION = "2026.12.2"


@dataclass(frozen=True, slots=True)
class Rule:
    """One detector.

    `group` names the part of the match that is the secret (0: the whole match); the
    optional group `pre` inside it is the public, fixed vendor prefix a masked preview may
    show. `keywords` are lower-case literals, one of which must occur in the lower-cased
    text for the pattern to run. `check` rejects a candidate secret (placeholders, words).
    `priority` decides overlaps: a vendor rule wins over the generic entropy rule.
    """

    kind: str
    pattern: re.Pattern[str]
    keywords: tuple[str, ...]
    group: int | str = 0
    check: Callable[[str], bool] | None = None
    priority: int = 10


# ---------------------------------------------------------------------------------------------
# Filters


def shannon_entropy(value: str) -> float:
    """Bits per character; random tokens score about 4 to 6, words and code about 2 to 3.5."""
    if not value:
        return 0.0
    counts: dict[str, int] = {}
    for ch in value:
        counts[ch] = counts.get(ch, 0) + 1
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


_PLACEHOLDER_WORDS = (
    "example",
    "placeholder",
    "your",
    "changeme",
    "redacted",
    "dummy",
    "xxxx",
    "****",
    "....",
    "<",
    ">",
    "${",
    "{{",
    "%(",
    "%s",
    "process.env",
    "os.environ",
    "getenv",
    # code, not a value: `a.credentials || b.credentials`, `x == y && z`
    "||",
    "&&",
    "==",
)
_IDENTIFIERISH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[.\-/][A-Za-z_][A-Za-z0-9_]*)*")
_HEX = re.compile(r"[0-9a-fA-F]+")
_DIGITS = re.compile(r"[0-9]+")
_WORDISH = re.compile(r"[a-z]{4,}")
_SEPARATORS = re.compile(r"[_\-/]")


def _sequential(value: str) -> bool:
    """Alphabets and counting runs ("ABCDEFGH...", "0123456789", "345679ACEF..."): the
    character sets code defines for generating tokens, not tokens."""
    steps = sum(1 for a, b in zip(value, value[1:], strict=False) if 0 < ord(b) - ord(a) <= 2)
    return steps >= 0.6 * (len(value) - 1)


def looks_random(value: str) -> bool:
    """Does a value assigned to a secret-ish name look like a generated secret?

    Why so strict: the entropy rule sees every `token = ...` and `"key": ...` in code, logs
    and tool output. A value counts only if it is long enough, mixes letters and digits (or
    is long and mixed-case), is not an identifier, a path, a number, a hex digest shorter
    than 32 characters or a placeholder, and is not too repetitive.
    """
    n = len(value)
    if n < 12 or n > 256:
        return False
    low = value.lower()
    if any(word in low for word in _PLACEHOLDER_WORDS):
        return False
    if _DIGITS.fullmatch(value):
        return False
    if value.startswith(("http:", "https:", "file:")) or (
        value.startswith(("/", "./", "~/")) and value.count("/") >= 2
    ):
        return False  # URLs (credentials in them have their own rule) and paths
    has_digit = any(c.isdigit() for c in value)
    has_upper = any(c.isupper() for c in value)
    has_lower = any(c.islower() for c in value)
    if _HEX.fullmatch(value):
        # digests and ids are everywhere; only a long random hex string counts
        return n >= 32 and has_digit and (has_upper or has_lower) and shannon_entropy(value) >= 3.0
    if not has_digit and not (has_upper and has_lower and n >= 20):
        return False  # words, CONSTANT_NAMES
    if _IDENTIFIERISH.fullmatch(value):
        if "." in value:
            return False  # attribute.chains.and_calls
        parts = _SEPARATORS.split(value)
        words = [p for p in parts if p]
        wordlike = sum((p.isalpha() and len(p) >= 3) or p.isdigit() for p in words)
        if len(words) > 1 and wordlike >= len(words) - len(words) // 3:
            return False  # snake_case_words_2, kebab-case-v2
    if _sequential(value):
        return False
    if has_upper and sum(len(run) for run in _WORDISH.findall(value)) >= 0.5 * n:
        # mostly runs of four or more lower-case letters: CamelCaseTypeNames and prose
        return False
    return shannon_entropy(value) >= (3.0 if n < 20 else 3.5)


_NAME_WORD = re.compile(
    r"secret|passw(?:or)?d|passwd|pwd|api[_\-]?key|apikey|access[_\-]?key|auth[_\-]?key|"
    r"private[_\-]?key|signing[_\-]?key|encryption[_\-]?key|token|credential|bearer|authorization",
    re.IGNORECASE,
)
# Names that mention a secret word but describe something else (counts, limits, kinds, files).
_NAME_NOT_SECRET = re.compile(
    r"tokens|tokeniz|token_?(?:count|type|limit|len|length|usage|budget|estimate|id|name|file|path|url|endpoint)|"
    r"(?:max|min|num|total|input|output|cache|reasoning)_?tokens?|"
    r"(?:secret|key|password|token)_?(?:name|names|id|ids|file|path|dir|type|length|len|field|prompt|env|var|ref|arn|version|hint)$|"
    r"keyword|keyboard|keys$|passthrough|password_?(?:reset|policy|strength|hash(?:er)?)",
    re.IGNORECASE,
)


def secretish_name(name: str) -> bool:
    """Is `name` (a variable, key or header name) one under which a secret is stored?"""
    return bool(_NAME_WORD.search(name)) and not _NAME_NOT_SECRET.search(name)


def _url_password_ok(value: str) -> bool:
    low = value.lower()
    if low in {"pass", "pw", "pwd", "x-oauth-basic"}:
        return False
    if any(word in low for word in (*_PLACEHOLDER_WORDS, "password", "passwd", "secret", "token")):
        return False
    if value.startswith(("$", "%", ":", "(")):
        return False
    if len(set(value)) == 1:  # ***, xxx
        return False
    # user:8080@ is a port before a proxy host more often than a password
    return not (_DIGITS.fullmatch(value) and len(value) <= 5)


def _aws_secret_ok(value: str) -> bool:
    return (
        any(c.isdigit() for c in value)
        and any(c.isupper() for c in value)
        and any(c.islower() for c in value)
        and shannon_entropy(value) >= 4.0
    )


def _openai_ok(value: str) -> bool:
    # the legacy and project formats carry a fixed marker; without it insist on randomness
    # so that `sk-` followed by a long kebab-case name is not a key
    if "T3BlbkFJ" in value:
        return True
    body = value.split("-", 1)[1]
    return (
        any(c.isdigit() for c in body)
        and any(c.isupper() for c in body)
        and any(c.islower() for c in body)
        and shannon_entropy(body) >= 4.0
    )


def _basic_ok(value: str) -> bool:
    """`Authorization: Basic <base64 of user:password>`: decode it, so that ordinary words
    after "basic" never count."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return False
    user, sep, password = decoded.partition(":")
    return bool(sep and password) and decoded.isprintable() and _url_password_ok(password)


def _bearer_ok(value: str) -> bool:
    return looks_random(value.rstrip("="))


# ---------------------------------------------------------------------------------------------
# Rules

_B = r"(?<![A-Za-z0-9_\-])"  # start of a token: not inside a longer word
_E = r"(?![A-Za-z0-9_\-])"  # end of a token

# `--api-key VALUE`, `-p VALUE` is not covered: only a long flag whose name is secret-ish
GENERIC_FLAG = re.compile(
    r"(?P<tail>[A-Za-z0-9_\-]{0,40})[ \t]+(?P<q>[\"']?)(?P<val>[^\s\"'`,;(){}\[\]<>\\=]{12,256}={0,2})"
    r"(?P=q)(?![^\s\"'`,;(){}\[\]<>\\])"
)

PRIVATE_KEY_MAX = 16384
PRIVATE_KEY_FOOTER = re.compile(r"-----END[ A-Z0-9_\-]{0,40}PRIVATE KEY(?: BLOCK)?-----")
# A key block cut short (truncated tool output): the base64 lines (and PEM header lines such
# as "Proc-Type: 4,ENCRYPTED") that follow the header; escaped newlines count as newlines.
PRIVATE_KEY_BODY = re.compile(r"(?:\\[nr]|[A-Za-z0-9+/=:,\-\s])+")

RULES: tuple[Rule, ...] = (
    Rule(
        "private-key",
        # the header only: the scanner finds the end itself (see PRIVATE_KEY_FOOTER), in
        # linear time however many headers a text holds
        re.compile(r"(?P<pre>-----BEGIN[ A-Z0-9_\-]{0,40}PRIVATE KEY(?: BLOCK)?-----)"),
        ("private key",),
        priority=30,
    ),
    Rule(
        "anthropic-api-key",
        re.compile(_B + r"(?P<pre>sk-ant-[a-z]{3,6}\d{2}-)[A-Za-z0-9_\-]{32,200}" + _E),
        ("sk-ant-",),
        priority=25,
    ),
    Rule(
        "openai-api-key",
        re.compile(
            _B + r"(?P<pre>sk-(?:(?:proj|svcacct|admin)-)?)"
            r"(?:[A-Za-z0-9_\-]{0,160}T3BlbkFJ[A-Za-z0-9_\-]{16,160}"
            r"|[A-Za-z0-9_\-]{40,200})" + _E
        ),
        ("sk-",),
        check=_openai_ok,
        priority=20,
    ),
    Rule(
        "aws-access-key",
        re.compile(
            r"(?<![A-Z0-9])(?P<pre>A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])"
        ),
        ("akia", "asia", "abia", "acca", "a3t"),
        priority=20,
    ),
    Rule(
        "aws-secret-key",
        re.compile(
            r"aws[A-Za-z0-9_.\-]{0,20}?(?:secret|key|token)[A-Za-z0-9_.\-]{0,20}"
            r"[\"']?\s{0,3}(?:=|:=|:|=>)\s{0,3}[\"']?"
            r"(?<![A-Za-z0-9/+])([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
            re.IGNORECASE,
        ),
        ("aws",),
        group=1,
        check=_aws_secret_ok,
        priority=20,
    ),
    Rule(
        "github-token",
        re.compile(
            # After any non-alphanumeric: the prefix is distinctive enough that a token glued
            # to a word by "-" or "_" (``screenshot-ghp_….png``) is still one.
            r"(?<![A-Za-z0-9])"
            + r"(?:(?P<pre>gh[pousr]_)[A-Za-z0-9]{36,251}|(?P<pre2>github_pat_)[A-Za-z0-9_]{60,120})"
            + _E
        ),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        priority=20,
    ),
    Rule(
        "gitlab-token",
        re.compile(
            _B + r"(?P<pre>(?:glpat|gldt|glft|glsoat|glrt|glcbt|glptt|glimt|gloas|glagent)-)"
            r"[A-Za-z0-9_\-]{20,1024}(?:\.[0-9a-z]{2}\.[0-9a-z]{7,9})?" + _E
        ),
        (
            "glpat-",
            "gldt-",
            "glft-",
            "glsoat-",
            "glrt-",
            "glcbt-",
            "glptt-",
            "glimt-",
            "gloas-",
            "glagent-",
        ),
        priority=20,
    ),
    Rule(
        "slack-webhook",
        re.compile(
            r"(?P<pre>https?://hooks\.slack\.com/)(?:services|workflows|triggers)/[A-Za-z0-9+/_\-]{20,200}"
        ),
        ("hooks.slack.com",),
        priority=20,
    ),
    Rule(
        "slack-token",
        re.compile(
            _B + r"(?:(?P<pre>xox[abposre]-)[0-9]{6,16}-[A-Za-z0-9\-]{8,200}"
            r"|(?P<pre2>xapp-)\d-[A-Z0-9]{6,32}-\d{6,20}-[A-Za-z0-9]{16,128}"
            r"|(?P<pre3>xoxe\.xox[bp]-)\d-[A-Za-z0-9]{100,400})" + _E
        ),
        ("xox", "xapp-"),
        priority=20,
    ),
    Rule(
        "stripe-key",
        re.compile(
            _B
            + r"(?:(?P<pre>(?:sk|rk)_(?:live|test|prod)_)[A-Za-z0-9]{16,250}|(?P<pre2>whsec_)[A-Za-z0-9]{32,256})"
            + _E
        ),
        ("k_live_", "k_test_", "k_prod_", "whsec_"),
        priority=20,
    ),
    Rule(
        "google-api-key",
        re.compile(_B + r"(?P<pre>AIza)[A-Za-z0-9_\-]{35}" + _E),
        ("aiza",),
        priority=20,
    ),
    # Other model providers: their keys are the ones most likely pasted into an agent session.
    Rule(
        "openrouter-api-key",
        re.compile(_B + r"(?P<pre>sk-or-v1-)[0-9a-f]{64}" + _E),
        ("sk-or-",),
        priority=25,
    ),
    Rule(
        "xai-api-key",
        re.compile(_B + r"(?P<pre>xai-)[A-Za-z0-9]{70,90}" + _E),
        ("xai-",),
        priority=20,
    ),
    Rule(
        "groq-api-key",
        re.compile(_B + r"(?P<pre>gsk_)[A-Za-z0-9]{48,56}" + _E),
        ("gsk_",),
        priority=20,
    ),
    Rule(
        "sendgrid-api-key",
        re.compile(_B + r"(?P<pre>SG\.)[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}" + _E),
        ("sg.",),
        priority=20,
    ),
    Rule(
        "digitalocean-token",
        re.compile(_B + r"(?P<pre>do[pro]_v1_)[a-f0-9]{64}" + _E),
        ("_v1_",),
        priority=20,
    ),
    Rule(
        "age-secret-key",
        re.compile(r"(?P<pre>AGE-SECRET-KEY-1)[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
        ("age-secret-key-1",),
        priority=20,
    ),
    Rule(
        "huggingface-token",
        re.compile(_B + r"(?P<pre>hf_)[A-Za-z]{34,40}" + _E),
        ("hf_",),
        priority=20,
    ),
    Rule(
        "npm-token",
        re.compile(_B + r"(?P<pre>npm_)[A-Za-z0-9]{36}" + _E),
        ("npm_",),
        priority=20,
    ),
    Rule(
        "pypi-token",
        re.compile(_B + r"(?P<pre>pypi-AgEIcHlwaS5vcmc)[A-Za-z0-9_\-]{50,1024}"),
        ("pypi-ageichlwas5vcmc",),
        priority=20,
    ),
    Rule(
        "jwt",
        re.compile(
            _B
            + r"(?P<pre>eyJ)[A-Za-z0-9_\-]{10,2048}\.eyJ[A-Za-z0-9_\-]{10,16384}\.[A-Za-z0-9_\-]{0,2048}={0,2}"
            r"(?![A-Za-z0-9_\-=])"
        ),
        ("eyj",),
        priority=15,
    ),
    Rule(
        "url-credentials",
        re.compile(
            r"\b[A-Za-z][A-Za-z0-9+.\-]{1,20}://[^\s:/?#@'\"<>\[\]{}\\]{1,128}:"
            r"([^\s/?#@'\"<>\[\]{}\\]{1,256})@[A-Za-z0-9.\-\[\]_]"
        ),
        ("://",),
        group=1,
        check=_url_password_ok,
        priority=15,
    ),
    Rule(
        "bearer-token",
        re.compile(r"\b[Bb]earer\s+([A-Za-z0-9_\-.~+/]{20,512}=*)(?![A-Za-z0-9_\-.~+/=])"),
        ("bearer",),
        group=1,
        check=_bearer_ok,
        priority=12,
    ),
    Rule(
        "basic-auth",
        re.compile(r"\b[Bb]asic\s+([A-Za-z0-9+/]{8,512}={0,2})(?![A-Za-z0-9+/=])"),
        ("basic",),
        group=1,
        check=_basic_ok,
        priority=12,
    ),
    Rule(
        "generic-secret",
        # Matched from just after each keyword occurrence (found by the keyword automaton,
        # far faster than letting the pattern try every position): the rest of the name, an
        # assignment operator, then a value, quoted or bare. The scanner extends the name
        # backwards and applies `secretish_name` and `looks_random`; a command-line flag
        # (`--token VALUE`) is tried with GENERIC_FLAG instead.
        re.compile(
            r"(?P<tail>[A-Za-z0-9_.\-]{0,40})(?:\\?[\"'])?\s{0,3}(?::=|=>|=|:)(?!=)\s{0,3}"
            r"(?P<q>(?:\\?[\"'`])?)(?P<val>[^\s\"'`,;(){}\[\]<>\\=]{12,256}={0,2})(?P=q)(?![^\s\"'`,;(){}\[\]<>\\]|\()"
        ),
        ("secret", "pass", "pwd", "key", "token", "credential", "auth"),
        group="val",
        priority=1,
    ),
)
