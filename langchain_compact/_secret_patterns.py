"""The patterns behind :func:`langchain_compact.redaction.redact_secrets`.

Every pattern runs in linear time: no nested quantifiers, no unbounded lazy scan to a
terminator that may never come (a PEM block without its END line is redacted to the end of
its base64 body), and bounded value lengths.

Token formats are ported from Yelp's detect-secrets 1.5.0 plugins (Apache-2.0;
``detect_secrets/plugins/*.py``: aws, azure_storage_key, basic_auth, discord, github_token,
gitlab_token, jwt, mailchimp, npm, private_key, pypi_token, sendgrid, slack, square_oauth,
stripe, telegram_token, twilio), with word boundaries added and quantifiers bounded; the
keyword heuristics (indirect references, templated values, type names) follow its
``filters/heuristic.py``. Google, Hugging Face, Anthropic and OpenAI formats are from the
providers' documentation.
"""

from __future__ import annotations

import re

_B = r"(?<![A-Za-z0-9_-])"  # a token must not continue a longer word
_E = r"(?![A-Za-z0-9_-])"

#: PEM private keys: the BEGIN line, the base64 body (real or ``\n``-escaped line breaks,
#: ``Proc-Type:``-style header lines) and the END line when there is one.
_PEM_SEP = r"(?:\r?\n|\\r\\n|\\n)"
_PEM_LINE = (
    r"[ \t]*(?:[A-Za-z0-9+/=]{1,4096}|[A-Za-z][A-Za-z0-9-]{0,40}:[^\n\\]{0,300})[ \t]*"
    r"(?=\r?\n|\\[rn]|[\"',]|$)"
)
PRIVATE_KEY = re.compile(
    r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"[A-Za-z0-9+/= \t]{0,8192}"
    rf"(?:{_PEM_SEP}(?:{_PEM_LINE})?){{0,512}}"
    r"(?:[ \t]*-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----)?"
    r"|PuTTY-User-Key-File-\d: [^\n]{0,200}(?:\r?\n[A-Za-z-]{1,40}: [^\n]{0,2000}){0,40}"
)

#: ``(kind, pattern)``: the whole match becomes ``[REDACTED:kind]``. Patterns whose kind is in
#: :data:`NEEDS_MIXED_CASE` only count when the match has a digit, an upper- and a
#: lower-case letter (so kebab-case names like ``sk-build-dependencies`` are left alone).
TOKENS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern))
    for kind, pattern in (
        ("anthropic_key", _B + r"sk-ant-[A-Za-z0-9_-]{20,400}" + _E),
        ("openai_key", _B + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,400}" + _E),
        ("aws_access_key", r"\b(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}\b"),
        (
            "github_token",
            _B + r"(?:gh[pousr]_[A-Za-z0-9_]{36,255}|github_pat_[A-Za-z0-9_]{22,255})" + _E,
        ),
        ("gitlab_token", _B + r"(?:glpat|gldt|glft|glsoat|glrt)-[A-Za-z0-9_-]{20,50}" + _E),
        ("slack_token", _B + r"xox[abposre]-[A-Za-z0-9-]{10,250}"),
        (
            "slack_webhook",
            r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{10,200}",
        ),
        ("google_api_key", _B + r"AIza[0-9A-Za-z_-]{35}" + _E),
        ("stripe_key", _B + r"(?:sk|rk)_(?:live|test)_[0-9a-zA-Z]{16,250}" + _E),
        ("huggingface_token", _B + r"hf_[A-Za-z0-9]{30,60}" + _E),
        ("npm_token", _B + r"npm_[A-Za-z0-9]{36}" + _E),
        ("pypi_token", _B + r"pypi-AgE[A-Za-z0-9_-]{70,400}" + _E),
        ("sendgrid_key", _B + r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}" + _E),
        ("square_token", _B + r"sq0(?:csp|atp)-[0-9A-Za-z_-]{22,43}" + _E),
        ("twilio_key", r"\b(?:AC|SK)[a-f0-9]{32}\b"),
        ("mailchimp_key", r"\b[0-9a-f]{32}-us[0-9]{1,2}\b"),
        ("telegram_token", r"\b\d{8,10}:AA[0-9A-Za-z_-]{33}" + _E),
        (
            "discord_token",
            _B + r"[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}" + _E,
        ),
        ("azure_storage_key", r"(?<=AccountKey=)[A-Za-z0-9+/=]{88}"),
        ("jwt", _B + r"eyJ[A-Za-z0-9_-]{8,2048}\.[A-Za-z0-9_-]{8,8192}\.[A-Za-z0-9_-]{0,2048}"),
    )
)
NEEDS_MIXED_CASE = frozenset({"anthropic_key", "openai_key"})
#: The prefix of ``sk-`` keys before their random part.
KEY_PREFIX = re.compile(r"^sk-(?:ant-(?:api\d\d-)?|proj-|svcacct-|admin-)?")

#: Literal substrings one of which every match contains: a pattern runs only when the text
#: holds one (``str.__contains__`` is far cheaper than a regex scan). Lower-case hints of
#: case-insensitive patterns are looked up in the lower-cased text. Missing: always runs.
HINTS: dict[str, tuple[str, ...]] = {
    "private_key": ("PRIVATE KEY", "PuTTY-User-Key-File"),
    "anthropic_key": ("sk-ant-",),
    "openai_key": ("sk-",),
    "aws_access_key": ("AKIA", "ASIA", "A3T", "ABIA", "ACCA"),
    "github_token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "gitlab_token": ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-"),
    "slack_token": ("xox",),
    "slack_webhook": ("hooks.slack.com",),
    "google_api_key": ("AIza",),
    "stripe_key": ("k_live_", "k_test_"),
    "huggingface_token": ("hf_",),
    "npm_token": ("npm_",),
    "pypi_token": ("pypi-",),
    "sendgrid_key": ("SG.",),
    "square_token": ("sq0",),
    "twilio_key": ("AC", "SK"),
    "mailchimp_key": ("-us",),
    "telegram_token": (":AA",),
    "azure_storage_key": ("AccountKey=",),
    "jwt": ("eyJ",),
}
LOWER_HINTS: dict[str, tuple[str, ...]] = {
    "bearer": ("bearer",),
    "basic_auth": ("authorization",),
    "url_password": ("://",),
    "url_credential": (
        "signature=", "credential=", "token=", "sig=", "key=", "secret=", "password=", "code=",
    ),
    "cli_password": ("mysql", "mariadb", "sshpass"),
    "cookie": ("cookie:",),
    "token_value": ("token",),
    "keyword": ("pass", "pwd", "secret", "key", "token"),
}  # fmt: skip

BEARER = re.compile(r"(?i)\b(Bearer[ \t]+)(?!\[REDACTED)[A-Za-z0-9._~+/=-]{8,4096}")
BASIC_AUTH = re.compile(
    r"(?i)\b(Authorization:[ \t]*Basic[ \t]+)(?!\[REDACTED)[A-Za-z0-9+/]{8,4096}={0,2}"
)

#: ``scheme://user:password@host``: the password (group ``pw``) goes.
URL_PASSWORD = re.compile(
    r"(?i)\b(?P<head>[a-z][a-z0-9+.-]{1,20}://[^\s:/?#@\"'<>\[\]]{0,256}:)"
    r"(?P<pw>[^\s/?#@\"'<>]{1,256})(?=@)"
)
#: Credentials in a query string (signed URLs, OAuth codes, API keys in links).
URL_QUERY = re.compile(
    r"(?i)(?P<head>[?&](?:x-amz-signature|x-amz-credential|x-amz-security-token"
    r"|x-goog-signature|x-goog-credential|sig|signature|token|access_token|id_token"
    r"|refresh_token|api_key|apikey|key|client_secret|password|code)=)"
    r"(?P<pw>[^&#\s\"'<>]{4,4096})"
)
#: ``token=<value>`` / ``token: <value>`` outside a query string (``token=3f9a...``); only
#: values with letters and digits count (see ``redaction._token_value``).
TOKEN_VALUE = re.compile(
    r"(?i)(?P<head>(?<![\w.-])token[ \t]*[=:][ \t]*[\"']?)(?P<pw>[A-Za-z0-9._~+/=-]{16,4096})"
)
#: A number followed by a unit: a size (``secret_key: 512 bits``), not a secret.
SIZE_UNIT = re.compile(
    r"[ \t]+(?:bits?|bytes?|chars?|characters?|digits?|letters?|symbols?|words?|[kmgt]i?b)\b",
    re.IGNORECASE,
)
#: ``mysql -pSECRET`` (and its siblings), ``sshpass -p SECRET``.
CLI_PASSWORD = re.compile(
    r"(?P<head>(?<![\w-])(?:mysql(?:dump|admin|import|show|slap|check)?|mariadb[\w-]{0,10})"
    r"\b[^\n|;&]{0,200}?[ \t]-p"
    r"|(?<![\w-])sshpass[ \t]+-p[ \t]*)"
    r"(?P<pw>'[^'\n]{1,256}'|\"[^\"\n]{1,256}\"|[^\s'\"]{1,256})"
)
#: ``Cookie:`` / ``Set-Cookie:`` headers: each ``name=value`` pair's value goes.
COOKIE_HEADER = re.compile(r"(?i)\b(?:set-)?cookie:[ \t]*[^\n'\"]{1,8192}")
COOKIE_PAIR = re.compile(r"(?P<head>(?:^|[;:][ \t]*)[\w.$-]{1,128}=)(?P<pw>[^;\s'\"]{1,4096})")

#: A keyword assignment: ``password = ...``, ``"api_key": ...``, ``['secret'] => ...``.
KEYWORD = re.compile(
    r"""(?ix)
    (?<![A-Za-z0-9])
    (?P<key>passw(?:or)?d|passphrase|pwd|secret|client[_-]?secret|secret[_-]?key
        |secret[_-]?access[_-]?key|api[_-]?key|apikey|access[_-]?token|auth[_-]?token
        |refresh[_-]?token|session[_-]?token|id[_-]?token|private[_-]?key)
    (?P<sep>(?:["'`]\]|\]|["'`])?[ \t]*(?::=|=>|=(?!=)|:(?![:=]))[ \t]*)
    """
)
QUOTED = re.compile(r"\"([^\"\n]{1,1024})\"|'([^'\n]{1,1024})'|`([^`\n]{1,1024})`")
WORD = re.compile(r"[^\s\"'`,;&)\]}]{1,1024}")
MORE_WORDS = re.compile(r"(?:[ \t]+[^\s\"'`,;&)\]}#\[][^\s\"'`,;&)\]}]{0,1023}){1,8}")

#: Values that are not secrets: references, templates, types, masks, earlier redactions
#: (after detect-secrets' ``is_templated_secret``, ``is_prefixed_with_dollar_sign`` and
#: ``is_indirect_reference``).
NOT_A_SECRET = re.compile(
    r"""(?ix)^(?:
        [$%<{]|\*{3,}|x{6,}$|\.{3}|\[REDACTED|\#|\?+$|:[A-Za-z_]\w*$
        |(?:os|process|env|environ|settings|config|cfg|conf|self|this|secrets|vault|request|args)
            [.\[]
        |getenv|environ|None$|null$|nil$|true$|false$|undefined$
        |(?:str|string|bytes|int|number|bool|boolean|any|unknown|object|secretstr|optional
            |union|char|text|varchar)\b
    )"""
)
#: A dotted name or a call / subscript: ``settings.api_key``, ``get_secret()``, ``cfg["x"]``.
REFERENCE = re.compile(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+$|^[A-Za-z_][\w.]*[\[(]")
#: An identifier naming a secret rather than holding one (``user_password``,
#: ``confirmPassword``): one of its ``_`` / camelCase parts is one of :data:`SECRET_WORDS`.
IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$")
NAME_PARTS = re.compile(r"_+|(?<=[a-z0-9])(?=[A-Z])")
SECRET_WORDS = frozenset(
    (  # noqa: SIM905
        "pass password passwd passphrase pwd secret token key apikey credential credentials"
    ).split()
)
#: First words of prose after "password:" ("Set the password: it must ...").
PROSE_START = frozenset(
    (  # noqa: SIM905
        "a an and are as at be by can cannot contains do does enter for from has have if in is it"
        " its may must need needs not of on one or please should that the then this to use was"
        " we were when which will with you your"
    ).split()
)
