"""Redaction corpus: texts holding a secret, and ordinary texts that must stay unchanged.

Key-shaped strings are built by concatenation so that no literal credential sits in the
repository (secret scanners would flag it). ``SECRETS`` rows are ``(name, text, fragments)``:
after redaction no fragment may remain. ``BENIGN`` rows are ``(name, text)``: redaction must
return the text unchanged. The formats follow detect-secrets' plugin test cases and the
issue's list of misses and false positives.
"""

from __future__ import annotations

_JWT = (
    "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    "." + "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    "." + "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
_AWS_SECRET = "wJalrXUtnFEMI" + "/K7MDENG/bPxRfiCYEXAMPLEKEY"
_AWS_SESSION = "IQoJb3JpZ2luX2Vj" + "EHYaCXVzLWVhc3QtMSJHMEUCIQD" * 3
_PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"
_OPENSSH_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gt"

SECRETS: list[tuple[str, str, list[str]]] = [
    ("openai", "key is sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4 ok", ["A1b2C3d4E5f6G7h8I9j0"]),
    ("openai_proj", "OPENAI_API_KEY=sk-proj-" + "Ab12_Cd34-Ef56Gh78Ij90Kl12Mn34", ["Ab12_Cd34"]),
    ("anthropic", '{"key": "sk-ant-api03-' + "x" * 40 + '-AA"}', ["x" * 40]),
    ("aws_key_id", "aws_access_key_id = AKIA" + "IOSFODNN7EXAMPLE", ["IOSFODNN7EXAMPLE"]),
    ("aws_secret", "aws_secret_access_key = " + _AWS_SECRET, [_AWS_SECRET]),
    ("aws_secret_env", 'AWS_SECRET_ACCESS_KEY="' + _AWS_SECRET + '"', [_AWS_SECRET]),
    ("aws_session", "aws_session_token=" + _AWS_SESSION, [_AWS_SESSION[:20]]),
    ("github", "git clone https://ghp_" + "a1B2" * 9 + "@github.com/x/y", ["a1B2a1B2"]),
    ("github_pat", "token github_pat_" + "11ABCDEFG0" * 4 + ".", ["11ABCDEFG0"]),
    ("gitlab", "GL=glpat-" + "xR4nd0mT0k3nV4lu3zz9", ["xR4nd0mT0k3nV4lu3zz9"]),
    ("slack", "SLACK=xoxb-" + "123456789012-abcdefghijklmnop", ["abcdefghijklmnop"]),
    (
        "slack_webhook",
        "post to https://hooks.slack.com/services/"
        + "T0AB1CD2E/B0FG3HI4J/aBcDeFgHiJkLmNoPqRsTuVwX",
        ["aBcDeFgHiJkLmNoPqRsTuVwX"],
    ),
    ("google", "maps key AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", ["SyD-9tSrke72Pou"]),
    ("stripe", "STRIPE=sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", ["4eC39HqLyjWDarjtT1zdp7dc"]),
    ("huggingface", "login --token hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567", ["AbCdEfGhIj"]),
    ("npm", "//registry.npmjs.org/:_authToken=npm_" + "a1B2c3D4" * 4 + "e5F6", ["a1B2c3D4a1"]),
    ("sendgrid", "SG." + "a" * 22 + "." + "B" * 43, ["B" * 43]),
    ("jwt_bare", "decoded " + _JWT + " fine", [_JWT[40:80]]),
    ("jwt_cookie", "Cookie: session=" + _JWT + "; theme=dark", [_JWT[40:80]]),
    ("cookie_value", "Set-Cookie: sessionid=8f3k2j4h5g6f7d8s; Path=/; HttpOnly", ["8f3k2j4h5g6f"]),
    ("bearer", "curl -H 'Authorization: Bearer abc.def_ghi-123456'", ["abc.def_ghi-123456"]),
    ("basic", "Authorization: Basic dXNlcjpwYXNzd29yZA==", ["dXNlcjpwYXNzd29yZA"]),
    (
        "pem",
        "id_rsa:\n-----BEGIN RSA PRIVATE KEY-----\n" + _PEM_BODY + "\nq2w3e4r5t6\n"
        "-----END RSA PRIVATE KEY-----\nnext line",
        [_PEM_BODY, "q2w3e4r5t6"],
    ),
    (
        "pem_no_end",
        "cat key\n-----BEGIN OPENSSH PRIVATE KEY-----\n" + _OPENSSH_BODY + "\n" + _OPENSSH_BODY,
        [_OPENSSH_BODY[:30]],
    ),
    (
        "pem_json_escaped",
        '{"private_key": "-----BEGIN PRIVATE KEY-----\\n' + _PEM_BODY + "\\n"
        '-----END PRIVATE KEY-----\\n", "client_email": "x@y.iam"}',
        [_PEM_BODY],
    ),
    ("postgres_url", "DATABASE_URL=postgres://admin:Tr0ub4dor@db.internal:5432/app", ["Tr0ub4dor"]),
    ("https_userinfo", "git push https://deploy:pa55w0rd@git.example.com/r.git", ["pa55w0rd"]),
    (
        "signed_url",
        "https://b.s3.amazonaws.com/a.png?X-Amz-Date=20240101&X-Amz-Signature=" + "9f2c" * 16,
        ["9f2c9f2c9f2c"],
    ),
    ("mysql_p", "mysql -u root -pS3cretPass mydb", ["S3cretPass"]),
    ("mysqldump", "mysqldump --password=Hunter2x appdb", ["Hunter2x"]),
    ("sshpass", "sshpass -p 'letMe1n' ssh deploy@host", ["letMe1n"]),
    ("password_phrase", "password = my secret phrase", ["my secret phrase", "secret phrase"]),
    ("password_quoted", 'DB_PASSWORD="correct horse battery"', ["correct horse battery"]),
    ("password_semicolon", "password=hunter22;", ["hunter22"]),
    ("api_key_dict", "config: {'api_key': 'abc123secret'}", ["abc123secret"]),
    ("api_key_header", "X-API-Key: 3f9a8b7c6d5e4f3a2b1c", ["3f9a8b7c6d5e4f3a2b1c"]),
    ("api_key_dash", "api-key: Zm9vYmFyYmF6", ["Zm9vYmFyYmF6"]),
    ("client_secret", "client_secret = s3cr3t-value", ["s3cr3t-value"]),
    ("access_token", "access_token: 9f8e7d6c5b4a", ["9f8e7d6c5b4a"]),
    ("yaml_password", "db:\n  password: s3cr3t-yaml\n  user: app", ["s3cr3t-yaml"]),
    ("php_array", "'password' => 'hunter2php',", ["hunter2php"]),
    ("go_walrus", 'apiKey := "abc123def456"', ["abc123def456"]),
    ("django", "SECRET_KEY=django-insecure-abc123xyz", ["django-insecure-abc123xyz"]),
]

BENIGN: list[tuple[str, str]] = [
    ("var_named_password", "password=user_password"),
    ("settings_reference", "api_key=settings.api_key"),
    ("ts_type", "password: string;"),
    ("comparison", "if password == confirm_password:"),
    ("prose_colon", "Set the password: it must be at least 12 characters long."),
    ("prose_click", "Reset your password: click the link we sent you."),
    ("yaml_prose", "Password: must contain a digit"),
    ("kebab_sk", "cache key sk-build-dependencies-for-the-project-cache"),
    ("kebab_sk_digits", "step sk-build-deps-v2-x86-64-linux-gnu-release"),
    ("sklearn", "Use scikit-learn (sk-learn) for a risk-free task-abcdefghijklmnopqrstuvwxyz0."),
    ("field_doc", "The password field is required; the API key lives in the vault."),
    ("py_signature", "def login(password: str, api_key: Optional[str] = None) -> bool:"),
    ("environ", "password = os.environ['DB_PASSWORD']"),
    ("env_var", "API_KEY=$OPENAI_API_KEY"),
    ("mask", "password: ********"),
    ("template", "secret: ${{ secrets.OPENAI_KEY }}"),
    ("placeholder", "password: <your password>"),
    ("call", "password = get_secret('db')"),
    ("dom", "const password = document.getElementById('pw').value;"),
    ("camel", "newPassword = confirmPassword"),
    ("pydantic", "api_key: SecretStr = Field(default=None)"),
    ("flag", "Password: \nflag{d316759c281bf925d600be698a4973d5}"),
    ("commit", "commit 0772c99cb290 fixed src/marshmallow/fields.py line 1474"),
    ("akia_prose", "AKIA is a prefix; AKIA123 is too short."),
    ("bearer_prose", "Bearer tokens are described in RFC 6750."),
    ("cjk", "中文内容：没有秘密。"),
    ("mysql_prompt", "mysql -u root -p appdb"),
    ("mysql_prompt_end", "run mysql -u root -p"),
    ("plain_url", "git clone https://github.com/org/repo.git and see https://x.org/a?page=2"),
    ("hf_function", "hf_hub_download(repo_id='gpt2', filename='config.json')"),
    ("stripe_prose", "rk_live_mode = True"),
    ("aiza_prose", "AIza is the prefix of Google API keys."),
    ("secret_prose", "The secret: nobody reads the docs."),
    ("session_prose", "The session token expires after 15 minutes."),
    ("min_length", "PASSWORD_MIN_LENGTH = 12"),
    ("none_value", "token = None; password = null"),
    ("eyj_prose", "eyJ is how base64-encoded JSON begins."),
    ("uuid", "request id 123e4567-e89b-12d3-a456-426614174000 finished"),
]
