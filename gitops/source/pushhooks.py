"""Push webhooks from Git hosts, checked and reduced to "this repository, this branch, this
commit" (pure). The caller (the HTTP API) caps the body size, then refreshes the matching
JobRepositories; nothing from a payload is ever applied — a push only triggers a fetch of what
the JobRepository already names.

Providers, by header:
- GitHub: `X-GitHub-Event: push` (`ping` → an ignored event), signature
  `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>`;
- GitLab: `X-Gitlab-Event: Push Hook` (or `Tag Push Hook`), token `X-Gitlab-Token` (the secret
  itself);
- Gitea / Forgejo: `X-Gitea-Event` / `X-Forgejo-Event: push`, signature `X-Gitea-Signature` /
  `X-Forgejo-Signature` (hex HMAC-SHA256 of the body, no prefix);
- anything else: generic JSON `{"repository": URL, "ref" | "branch": …, "commit"?: sha}`,
  authenticated (when a secret is configured) by `X-Hub-Signature-256` or `X-Trainops-Token`.

When a secret is configured the signature or token is required: missing or wrong → 401. Every
comparison is constant-time (`hmac.compare_digest`). Invalid JSON or a payload without a
repository → 400. Repository URLs come back normalized (`gitops.engine.urls.normalize_repo_url`),
every form the payload offers (clone, SSH and web URLs), so a JobRepository matches whichever it
uses.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gitops.engine.urls import normalize_repo_url

__all__ = ["PushError", "PushEvent", "parse_push"]


class PushError(Exception):
    """The request is refused: `status` is the HTTP status to answer (400, 401)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class PushEvent:
    provider: str
    """github, gitlab, gitea, forgejo or generic."""
    repo_urls: tuple[str, ...]
    """Normalized; empty for an ignored event."""
    branch: str | None
    """`main` for `refs/heads/main`; None for a tag push or when not given."""
    commit: str | None
    ignored: bool = False
    """A ping or a non-push event: answer 200 and do nothing."""
    tag: str | None = None


def parse_push(headers: Mapping[str, str], body: bytes, secret: bytes | None) -> PushEvent:
    """Check and read one webhook request; raises PushError."""
    h = {k.lower(): v for k, v in headers.items()}
    if "x-github-event" in h:
        _check_hmac(h.get("x-hub-signature-256"), body, secret, prefix="sha256=")
        event = h["x-github-event"].strip().lower()
        if event != "push":
            return PushEvent("github", (), None, None, ignored=True)
        payload = _json(body)
        repo = _dict(payload.get("repository"))
        return _event(
            "github",
            payload,
            [repo.get(k) for k in ("clone_url", "ssh_url", "html_url", "git_url", "url")],
        )
    if "x-gitlab-event" in h:
        _check_token(h.get("x-gitlab-token"), secret)
        event = h["x-gitlab-event"].strip().lower()
        if event not in ("push hook", "tag push hook"):
            return PushEvent("gitlab", (), None, None, ignored=True)
        payload = _json(body)
        project = _dict(payload.get("project"))
        repo = _dict(payload.get("repository"))
        urls = [project.get(k) for k in ("git_http_url", "git_ssh_url", "web_url")]
        urls += [repo.get(k) for k in ("git_http_url", "git_ssh_url", "homepage", "url")]
        return _event("gitlab", payload, urls, commit_key="checkout_sha")
    for provider in ("gitea", "forgejo"):
        if f"x-{provider}-event" in h:
            signature = h.get(f"x-{provider}-signature") or h.get("x-gitea-signature")
            _check_hmac(signature, body, secret, prefix="")
            if h[f"x-{provider}-event"].strip().lower() != "push":
                return PushEvent(provider, (), None, None, ignored=True)
            payload = _json(body)
            repo = _dict(payload.get("repository"))
            return _event(
                provider, payload, [repo.get(k) for k in ("clone_url", "ssh_url", "html_url")]
            )
    if secret is not None:
        if "x-hub-signature-256" in h:
            _check_hmac(h["x-hub-signature-256"], body, secret, prefix="sha256=")
        else:
            _check_token(h.get("x-trainops-token"), secret)
    payload = _json(body)
    repository = payload.get("repository")
    if isinstance(repository, dict):
        repository = repository.get("url") or repository.get("clone_url")
    ref = payload.get("ref")
    if not isinstance(ref, str) and isinstance(payload.get("branch"), str):
        ref = "refs/heads/" + payload["branch"]
        payload = {**payload, "ref": ref}
    return _event("generic", payload, [repository], commit_key="commit")


# --- internals --------------------------------------------------------------------------------


def _check_hmac(signature: str | None, body: bytes, secret: bytes | None, *, prefix: str) -> None:
    if secret is None:
        return
    if not signature:
        raise PushError(401, "missing signature")
    expected = prefix + hmac.new(secret, body, hashlib.sha256).hexdigest()
    # A header of bytes that are not UTF-8 arrives with surrogates: kept as bytes, no match.
    given = signature.strip().lower().encode("utf-8", "surrogateescape")
    if not hmac.compare_digest(given, expected.encode()):
        raise PushError(401, "signature does not match")


def _check_token(token: str | None, secret: bytes | None) -> None:
    if secret is None:
        return
    if not token:
        raise PushError(401, "missing token")
    if not hmac.compare_digest(token.encode("utf-8", "surrogateescape"), secret):
        raise PushError(401, "token does not match")


def _json(body: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise PushError(400, "the body is not valid JSON") from None
    if not isinstance(payload, dict):
        raise PushError(400, "the body is not a JSON object")
    return payload


def _event(
    provider: str, payload: dict[str, Any], urls: list[Any], *, commit_key: str = "after"
) -> PushEvent:
    found: list[str] = []
    for url in urls:
        if isinstance(url, str) and url.strip():
            norm = normalize_repo_url(url)
            if norm not in found:
                found.append(norm)
    if not found:
        raise PushError(400, "the payload names no repository")
    ref = payload.get("ref")
    branch = tag = None
    if isinstance(ref, str):
        if ref.startswith("refs/heads/"):
            branch = ref[len("refs/heads/") :]
        elif ref.startswith("refs/tags/"):
            tag = ref[len("refs/tags/") :]
    commit = payload.get(commit_key) or payload.get("after")
    return PushEvent(
        provider,
        tuple(found),
        branch,
        commit if isinstance(commit, str) and commit else None,
        tag=tag,
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
