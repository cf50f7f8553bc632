"""Secrets never reach a log or the site: credentials in URLs and the values of known secret variables are masked."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import urlsplit

MASK = "***"
# user:password@ (or token@) after a scheme, in any text: command lines, tool output, error messages.
URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/\s@'\"<>]+)@")
SECRET_NAME = re.compile(
    r"(^|_)(TOKEN|PASSWORD|PASSWD|PASS|PASSPHRASE|SECRET|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|SIGNING_?KEY|AUTH"
    r"|CREDENTIALS?|COOKIE)S?($|_)"
    # APITOKEN glued to what comes before (CODECOV_APITOKEN, MYAPITOKEN); PWD and PAT only after an underscore
    # (DB_PWD, GH_PAT), so the shell's PWD and OLDPWD, and PATH, stay readable.
    r"|APITOKENS?($|_)|_(PWD|PAT)S?($|_)",
    re.IGNORECASE,
)
# An HTTP Authorization (or Proxy-Authorization) header in any text: `-H "Authorization: Bearer abc"`, curl -v
# output, a header dump. Its credential is masked; the scheme word stays.
AUTH_HEADER = re.compile(
    r"(?P<head>\b(?:proxy-)?authorization[\'\"]?\s*[:=]\s*[\'\"]?(?:(?:bearer|basic|token|digest|negotiate)\s+)?)"
    r"(?P<credential>[^\s'\"]+)",
    re.IGNORECASE,
)
# Variables whose whole value is a credential-bearing location: secret as a whole when it holds userinfo.
LOCATION_NAMES = frozenset(
    name
    for base in (
        "PIP_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "PIP_FIND_LINKS",
        "UV_INDEX_URL",
        "UV_EXTRA_INDEX_URL",
        "UV_INDEX",
        "UV_DEFAULT_INDEX",
        "UV_FIND_LINKS",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "FTP_PROXY",
    )
    for name in (base, base.lower())
)
MIN_SECRET = 4  # shorter values would mask ordinary words


def is_secret(name: str, value: str) -> bool:
    """Whether an environment variable's value must never be shown: a secret-looking name, or a URL with userinfo."""
    if not value:
        return False
    if SECRET_NAME.search(name):
        return True
    return bool(URL_USERINFO.search(value)) or (name in LOCATION_NAMES and "@" in value)


def secret_values(environ: Mapping[str, str]) -> list[str]:
    """The strings to mask for this environment: whole secret values and the userinfo parts of URLs, longest first."""
    found: set[str] = set()
    for name, value in environ.items():
        if not is_secret(name, value):
            continue
        if SECRET_NAME.search(name) and len(value) >= MIN_SECRET:
            found.add(value)
        for location in re.split(r"[\s,]+", value):
            try:
                parts = urlsplit(location)
            except ValueError:
                continue
            # The password; a user name alone is the credential (https://TOKEN@host), with a password it is not.
            part = parts.password or (parts.username if "@" in location else None)
            if part and len(part) >= MIN_SECRET:
                found.add(part)
    return sorted(found, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """text with URL userinfo, Authorization header credentials and every given secret replaced by ***."""
    text = URL_USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    text = AUTH_HEADER.sub(lambda m: f"{m['head']}{MASK}", text)
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


def redact_argv(argv: Sequence[str], secrets: Iterable[str] = ()) -> list[str]:
    return [redact(part, secrets) for part in argv]
