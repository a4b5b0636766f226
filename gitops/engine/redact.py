"""Credentials in text, masked: the one function every surface that can show a repository URL
(log lines, the HTTP API, the dashboard, Events, a JobRepository's `.status`, git's own error
messages, which echo the URL) passes its text through.

Why one function: a `repoURL` is user input, and users put credentials in it —
`https://user:TOKEN@host/…`, `ssh://git:PASSWORD@host/…`, `https://host/…?private_token=…`.
trainops never needs to *show* them (`gitops.engine.urls` splits userinfo off into credentials
before git runs), so every place that shows text masks the same things the same way, and a new
surface only has to call `redact`.

What is masked (the rest of the text is left exactly as it was, so messages stay readable):

- the whole userinfo of an HTTP(S) URL, where the user part is often the token itself
  (`https://ghp_x@github.com`, `https://x-access-token:ghp_x@github.com` → `https://***@github.com`);
- the password of any other URL's userinfo: `ssh://git:pw@host` → `ssh://git:***@host`; an SSH
  user name alone (`ssh://git@host`, scp-like `git@host:org/repo`) is no secret and stays;
- the values of the query parameters `access_token`, `private_token`, `token`, `password` and
  `client_secret` (any case): `?private_token=abc&x=1` → `?private_token=***&x=1`.

Pure: no I/O, no state. `RedactingFormatter` applies `redact` to whole log records (message,
arguments and traceback), for the command-line shells to install on their log handlers.
"""

from __future__ import annotations

import logging
import re
from typing import Any

__all__ = ["MASK", "RedactingFormatter", "printable", "redact", "redact_value"]

MASK = "***"

# scheme://userinfo@ — the userinfo is everything up to the last `@` before the host ends (a
# password with an unescaped `@` is still masked whole). Stops at `/`, `?`, `#` and whitespace
# and quotes, so the next URL on the same line is never swallowed.
_USERINFO = re.compile(
    r"(?i)\b(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<userinfo>[^/?#\s'\"<>@]*(?:@[^/?#\s'\"<>@]*)*)@"
)
_SECRET_PARAMS = ("access_token", "private_token", "token", "password", "client_secret")
_QUERY = re.compile(
    r"(?i)(?P<name>[?&;](?:" + "|".join(_SECRET_PARAMS) + r")=)(?P<value>[^&#\s'\"<>]*)"
)
_HTTP = frozenset({"http", "https"})


def redact(text: str) -> str:
    """`text` with HTTP(S) userinfo, other URL passwords and secret query values masked."""
    if "@" in text:
        text = _USERINFO.sub(_userinfo, text)
    if "=" in text:
        text = _QUERY.sub(lambda m: m["name"] + (MASK if m["value"] else ""), text)
    return text


def redact_value(value: Any) -> Any:
    """`value` (plain JSON-like data: dicts, lists, strings) with every string `redact`ed; a
    new structure, the input is not changed."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v) for v in value]
    return value


_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x9b]")


def printable(text: str) -> str:
    """`text` safe for a terminal: control characters (ESC, BEL, …; not newline or tab) shown as
    `\\x1b`, so a file name from a repository cannot set a title or clear the screen."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)


class RedactingFormatter(logging.Formatter):
    """A `logging.Formatter` whose output (message, arguments, traceback) is `redact`ed and
    `printable`."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(redact(super().format(record)))


def _userinfo(m: re.Match[str]) -> str:
    scheme, userinfo = m["scheme"], m["userinfo"]
    if scheme.lower() in _HTTP:
        return f"{scheme}://{MASK}@" if userinfo else m.group(0)
    user, colon, _password = userinfo.partition(":")
    return f"{scheme}://{user}:{MASK}@" if colon else m.group(0)
