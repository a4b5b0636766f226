"""Repository URLs, revisions and credentials as users write them in a JobRepository, checked
and normalised before any git runs (pure: no I/O), for `gitops.source.git` and the rules that match
repositories (`gitops.engine.tenancy`, `gitops.source.pushhooks`).

Safety, because `repoURL` and `targetRevision` come from users: a URL or revision starting with
`-` is refused, revisions must pass `check-ref-format`'s rules (or be a hex sha), URLs must be
one of the schemes below; userinfo in a URL is split off into credentials (`split_url`), and
every message is scrubbed of URL credentials (`gitops.engine.redact`) and of the secret values
themselves (`scrub`).

URLs: `https://`, `http://` (allowed; `is_insecure` says so, for a warning), `ssh://`,
scp-like `git@host:org/repo.git`, `file://`, and a plain absolute local path (made `file://`;
the command line makes a relative one absolute first, `absolute_local_path`: the engine reads
no working directory).

`GitError` lives here, the lowest of the git modules, because a bad URL or revision is the
first way a git operation fails.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from urllib.parse import quote as url_quote
from urllib.parse import unquote, urlsplit, urlunsplit

from gitops.engine import redact

__all__ = [
    "FULL_SHA",
    "SHA",
    "Binding",
    "Credentials",
    "GitError",
    "absolute_local_path",
    "binding_of",
    "canonical_url",
    "is_insecure",
    "is_local_path",
    "normalize_repo_url",
    "path_problem",
    "quote",
    "scrub",
    "shown",
    "split_url",
    "validate_revision",
    "validate_url",
]

SHA = re.compile(r"^[0-9a-fA-F]{7,40}$")
FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
_SCP = re.compile(
    r"^(?:(?P<user>[^@/:\s]+)@)?(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*):(?P<path>[^\s]+)$"
)
_SCHEMES = ("https", "http", "ssh", "file")
_DEFAULT_PORTS = {"https": 443, "http": 80, "ssh": 22}


class GitError(Exception):
    """A git operation failed; the message says what, in the user's terms, without secrets."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Credentials:
    """From the JobRepository's Secret: an SSH key, or username + password, or a token.

    A token is sent as the password of user `x-access-token` unless a username is given
    (GitHub and Gitea accept any user name with a token; GitLab wants one, any).
    """

    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    ssh_private_key: str | None = field(default=None, repr=False)
    bound_to: str | None = None
    """The URL or prefix the credentials are for (the Secret's `url` that covers the repository
    URL); None: the repository URL itself. Git is given them only for requests there
    (`binding_of`): not after a redirect elsewhere, not for another port, scheme or path."""
    known_hosts: str | None = None
    """For an SSH key: the server's host keys (known_hosts lines); with them the host is pinned
    (StrictHostKeyChecking=yes), without them its first key is recorded and then required."""

    def secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self.password, self.token, self.ssh_private_key) if s)


def validate_url(url: str) -> str:
    """The URL to hand git (userinfo removed; a local path made `file://`), or GitError."""
    clean, _, _ = split_url(url)
    return clean


def is_insecure(url: str) -> bool:
    """Whether `url` is plain `http://` (credentials and content travel unencrypted)."""
    return url.strip().lower().startswith("http://")


def normalize_repo_url(url: str) -> str:
    """A canonical form for matching push webhooks to repositories.

    Lower-case scheme and host; no userinfo, default port, trailing slash or `.git`; scp-like
    `git@host:org/repo.git` becomes `ssh://host/org/repo`; a local path `file:///abs/path`.
    Never raises: an unparseable URL is returned stripped.
    """
    text = url.strip()
    scp = _SCP.match(text) if "://" not in text else None
    if scp is not None:
        text = f"ssh://{scp['host']}/{scp['path'].lstrip('/')}"
    elif "://" not in text:
        text = _file_uri(text) if text.startswith("/") else text
    try:
        parts = urlsplit(text)
        scheme = parts.scheme.lower()
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        return text
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    if port is not None and _DEFAULT_PORTS.get(scheme) != port:
        host = f"{host}:{port}"
    path = parts.path.rstrip("/")
    if path.endswith(".git"):
        path = path[: -len(".git")]
    path = path.rstrip("/")
    return urlunsplit((scheme, host, path, "", ""))


def validate_revision(revision: str | None) -> str:
    """`HEAD` for none; else the revision if it is a hex sha or a valid ref name, or GitError."""
    if revision is None or revision.strip() == "" or revision == "HEAD":
        return "HEAD"
    if SHA.match(revision):
        return revision.lower()
    problem = _ref_format_problem(revision)
    if problem:
        raise GitError(f"invalid revision {quote(revision)}: {problem}")
    return revision


def scrub(text: str, secrets: tuple[str, ...] = ()) -> str:
    """`text` with URL credentials masked (`gitops.engine.redact.redact`: userinfo, secret query
    parameters) and without any of `secrets`."""
    text = redact.redact(text)
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
            for line in secret.splitlines():
                if len(line.strip()) >= 8:
                    text = text.replace(line.strip(), "***")
    return text


def split_url(url: str) -> tuple[str, str | None, str | None]:
    """(URL for git without userinfo, username, password) or GitError."""
    if not isinstance(url, str) or not url.strip():
        raise GitError("no repository URL given")
    text = url.strip()
    if text.startswith("-"):
        raise GitError(f"refusing repository URL {quote(scrub(text))}: it starts with '-'")
    if any(ord(c) < 0x20 or c == "\x7f" for c in text) or " " in text:
        raise GitError("refusing repository URL: it contains whitespace or control characters")
    if "::" in text.split("/", 1)[0]:  # `ext::cmd`, `fd::0`: git's remote-helper syntax
        raise GitError(f"unsupported repository URL {quote(scrub(text))}")
    if "://" not in text:
        scp = _SCP.match(text)
        if scp is not None and not text.startswith(("/", ".")):
            if scp["path"].startswith("-") or scp["host"].startswith("-"):
                raise GitError(f"refusing repository URL {quote(scrub(text))}")
            return text, None, None  # ssh user in scp form is not a secret
        if not text.startswith("/"):
            raise GitError(
                f"refusing repository path {quote(scrub(text))}: a local path must be absolute"
            )
        return _file_uri(text), None, None
    try:
        parts = urlsplit(text)
        _ = parts.port
    except ValueError:
        raise GitError(f"invalid repository URL {quote(scrub(text))}") from None
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise GitError(
            f"unsupported repository URL scheme {scheme!r}: use https, http, ssh or file"
        )
    if scheme != "file" and not parts.hostname:
        raise GitError(f"invalid repository URL {quote(scrub(text))}: no host")
    if (parts.hostname or "").startswith("-") or parts.path.startswith("-"):
        raise GitError(f"refusing repository URL {quote(scrub(text))}")
    user, password = parts.username, parts.password
    if scheme == "ssh":  # ssh://git@host/…: the user is part of the address, not a secret
        return text, None, None
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((scheme, netloc, parts.path, parts.query, "")), user, password


def _ref_format_problem(ref: str) -> str:
    """What `git check-ref-format --allow-onelevel` would object to, or ""."""
    if ref.startswith("-"):
        return "it starts with '-'"
    if len(ref) > 255:
        return "it is too long"
    if any(ord(c) < 0x20 or c == "\x7f" for c in ref):
        return "it contains control characters"
    for bad in (" ", "~", "^", ":", "?", "*", "[", "\\"):
        if bad in ref:
            return f"it contains {bad!r}"
    if ".." in ref or "@{" in ref or "//" in ref:
        return "it contains '..', '@{' or '//'"
    if ref == "@" or ref.endswith((".", "/", ".lock")) or ref.startswith("/"):
        return "it is not a valid ref name"
    if any(part.startswith(".") or part.endswith(".lock") for part in ref.split("/")):
        return "a component starts with '.' or ends with '.lock'"
    return ""


def shown(url: str | None) -> str:
    """`url` as messages show it: credentials masked."""
    return scrub(url or "")


def quote(text: str) -> str:
    """`text` in double quotes for a message, cut to 80 characters."""
    text = text if len(text) <= 80 else text[:77] + "..."
    return '"' + text.replace('"', '\\"') + '"'


def is_local_path(text: str) -> bool:
    """Whether `text` is a path on this machine rather than a URL or scp-like `host:path`."""
    stripped = text.strip()
    if not stripped or "://" in stripped:
        return False
    return stripped.startswith(("/", ".")) or _SCP.match(stripped) is None


def absolute_local_path(text: str, cwd: str) -> str:
    """`text` made absolute against `cwd` when it is a relative local path (not a URL, not
    scp-like `host:path`); anything else unchanged. For the command line, which knows `cwd`."""
    stripped = text.strip()
    if not is_local_path(stripped) or stripped.startswith("/"):
        return text
    return posixpath.normpath(posixpath.join(cwd, stripped))


def _file_uri(path: str) -> str:
    """`file://` and the normalised absolute path, percent-encoded as `Path.as_uri` does."""
    normal = posixpath.normpath(path)
    if normal.startswith("//"):
        normal = "/" + normal.lstrip("/")
    return "file://" + url_quote(normal, safe="/")


# --- where credentials may go -----------------------------------------------------------------

_UNRESERVED = re.compile(r"%([0-9A-Fa-f]{2})")


@dataclass(frozen=True)
class Binding:
    """Where credentials may be sent, in the terms of git's credential protocol: `protocol`,
    `hosts` (host[:port] as git writes it — both forms when the port is the default one) and
    `path` (decoded, no `/` at either end, no `.git`; "" for every path on the host).

    `gitops.source.process` hands git the credentials through a helper that compares each of
    git's requests with these fields; `covers` is the same rule in Python."""

    protocol: str
    hosts: tuple[str, ...]
    path: str

    def covers(self, protocol: str, host: str, path: str) -> bool:
        """Whether git's request for (`protocol`, `host`, `path` — decoded, as git passes
        them with `credential.useHttpPath`) is one the credentials are for."""
        if protocol != self.protocol or host.lower() not in self.hosts:
            return False
        path = path.strip("/")
        if any(c in path for c in "%\\;\0") or _dot_segment(path.split("/")):
            return False
        if not self.path:
            return True
        return any(path == p or path.startswith(p + "/") for p in (self.path, self.path + ".git"))


def path_problem(url: str) -> str | None:
    """Why `url`'s path is ambiguous to match against a prefix, or None: a `.` or `..` segment,
    written plainly, percent-encoded (`%2e%2e`, twice encoded, with `;params`), or an encoded
    `/` or `\\` (`%2f`, `%5c`) or a backslash — a server may resolve any of them to a path
    outside the prefix the URL seems to be under."""
    text = url.strip()
    scp = _SCP.match(text) if "://" not in text else None
    try:
        path = scp["path"] if scp is not None else urlsplit(text).path
    except ValueError:
        return "it cannot be parsed"
    if "\\" in path:
        return "its path has a backslash"
    decoded = path
    for _ in range(3):  # a server may decode more than once
        segments = decoded.split("/")
        if _dot_segment(segments):
            return "its path has a '.' or '..' segment (plain or percent-encoded)"
        if any(c in unquote(s) for s in segments for c in "/\\\0"):
            return "its path has an encoded '/', '\\' or NUL (%2f, %5c, %00)"
        decoded = "/".join(unquote(s) for s in segments)
    return None


def binding_of(url: str) -> Binding:
    """The `Binding` of a URL or prefix (as `normalize_repo_url` reads it), or GitError when its
    path is ambiguous (`path_problem`) or it has no host."""
    problem = path_problem(url)
    if problem:
        raise GitError(f"credentials are not bound to {quote(scrub(url))}: {problem}")
    canonical = normalize_repo_url(url)
    parts = urlsplit(canonical)
    host = (parts.hostname or "").lower()
    if not parts.scheme or not host:
        raise GitError(f"credentials are not bound to {quote(scrub(url))}: no scheme or host")
    if ":" in host:
        host = f"[{host}]"
    default = _DEFAULT_PORTS.get(parts.scheme)
    port = parts.port or default
    hosts = (f"{host}:{port}",) if port != default else (host, f"{host}:{port}")
    path = unquote(parts.path).strip("/")
    return Binding(parts.scheme, hosts, path)


def canonical_url(url: str) -> str:
    """`normalize_repo_url`, with percent-escapes of unreserved characters decoded and the
    others' hex in upper case (RFC 3986, 6.2.2): `team-%61` is `team-a`."""

    def fix(m: re.Match[str]) -> str:
        char = chr(int(m[1], 16))
        return char if char.isascii() and (char.isalnum() or char in "-._~") else m[0].upper()

    return _UNRESERVED.sub(fix, normalize_repo_url(url))


def _dot_segment(segments: list[str]) -> bool:
    for segment in segments:
        plain = unquote(segment).split(";", 1)[0]
        if plain in (".", ".."):
            return True
    return False
