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

Two kinds of secret: the service's shared one (`--webhook-secret`) and a JobRepository's own
(`spec.push.secretRef`); `PushCheck` decides which repositories a request may trigger. With a
shared secret, a request that proves no secret at all is a 401 (missing or wrong). Every
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

__all__ = ["Proof", "PushCheck", "PushError", "PushEvent", "parse_push", "proof_of", "read_push"]


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
    """Check and read one webhook request against one secret (None: no check); raises
    PushError."""
    proof = proof_of(headers)
    if secret is not None:
        problem = proof.problem(body, secret)
        if problem is not None:
            raise PushError(401, problem)
    return read_push(headers, body)


def proof_of(headers: Mapping[str, str]) -> Proof:
    """What the request offers to show it comes from who knows a secret: the provider's
    signature or token header (`given` None when it is missing)."""
    h = {k.lower(): v for k, v in headers.items()}
    if "x-github-event" in h:
        return Proof("hmac", h.get("x-hub-signature-256"), "sha256=")
    if "x-gitlab-event" in h:
        return Proof("token", h.get("x-gitlab-token"))
    for provider in ("gitea", "forgejo"):
        if f"x-{provider}-event" in h:
            return Proof("hmac", h.get(f"x-{provider}-signature") or h.get("x-gitea-signature"))
    if "x-hub-signature-256" in h:
        return Proof("hmac", h["x-hub-signature-256"], "sha256=")
    return Proof("token", h.get("x-trainops-token"))


def read_push(headers: Mapping[str, str], body: bytes) -> PushEvent:
    """Read one webhook request, checking no signature (`Proof` does); raises PushError 400."""
    h = {k.lower(): v for k, v in headers.items()}
    if "x-github-event" in h:
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
            if h[f"x-{provider}-event"].strip().lower() != "push":
                return PushEvent(provider, (), None, None, ignored=True)
            payload = _json(body)
            repo = _dict(payload.get("repository"))
            return _event(
                provider, payload, [repo.get(k) for k in ("clone_url", "ssh_url", "html_url")]
            )
    payload = _json(body)
    repository = payload.get("repository")
    if isinstance(repository, dict):
        repository = repository.get("url") or repository.get("clone_url")
    ref = payload.get("ref")
    if not isinstance(ref, str) and isinstance(payload.get("branch"), str):
        ref = "refs/heads/" + payload["branch"]
        payload = {**payload, "ref": ref}
    return _event("generic", payload, [repository], commit_key="commit")


@dataclass(frozen=True)
class Proof:
    """A request's signature (`hmac`: hex HMAC-SHA256 of the body after `prefix`) or token
    (`token`: the secret itself), as its provider sends it."""

    scheme: str
    given: str | None
    prefix: str = ""

    def problem(self, body: bytes, secret: bytes) -> str | None:
        """None when it proves `secret`; else the 401's words. An empty secret proves
        nothing (anyone can compute an HMAC with an empty key)."""
        what = "signature" if self.scheme == "hmac" else "token"
        if not self.given:
            return f"missing {what}"
        # A header of bytes that are not UTF-8 arrives with surrogates: kept as bytes, no match.
        if self.scheme == "hmac":
            expected = (self.prefix + hmac.new(secret, body, hashlib.sha256).hexdigest()).encode()
            given = self.given.strip().lower().encode("utf-8", "surrogateescape")
        else:
            expected, given = secret, self.given.encode("utf-8", "surrogateescape")
        if not secret or not hmac.compare_digest(given, expected):
            return f"{what} does not match"
        return None


class PushCheck:
    """Which repositories one push may trigger, given the shared secret (`--webhook-secret`,
    None when unset) and, repository by repository, the push secret it names:

    - a repository naming its own secret (`spec.push.secretRef`) is triggered only by a
      request that proves that secret — not by the shared one, nor unsigned; a secret that
      cannot be read or is empty proves nothing;
    - a repository naming none is triggered by a request that proves the shared secret, or
      by any request when there is no shared secret (as before per-repository secrets);
    - `refusal` after the repositories were asked: with a shared secret, a request that
      proved no secret at all is a 401 (the same words whether or not any repository follows
      its URL, so the answer names nothing).

    Pure but for what it accumulates (`verified`) while the caller asks `admits`.
    """

    def __init__(self, proof: Proof, body: bytes, shared: bytes | None) -> None:
        self.proof = proof
        self.body = body
        self.shared = shared
        self.by_shared = shared is None or proof.problem(body, shared) is None
        self.verified = False
        """True once a repository's own secret was proved."""

    @classmethod
    def anonymous(cls) -> PushCheck:
        """A push with no proof to a service with no shared secret (what a caller in this
        process, e.g. a benchmark, sends): repositories naming a secret are not triggered."""
        return cls(Proof("token", None), b"", None)

    def admits(self, own: bytes | None) -> bool:
        """`own`: None when the repository names no push secret; its value otherwise (b""
        when it cannot be read)."""
        if own is None:
            return self.by_shared
        if self.proof.problem(self.body, own) is not None:
            return False
        self.verified = True
        return True

    def proven(self, own: bytes | None) -> bool:
        """Whether a push `admits` let through for a repository (`own` as there) proved a
        secret — the repository's own, or the shared one — rather than being let through
        because no secret is asked of it (the reconciler bounds what those may trigger)."""
        return own is not None or self.shared is not None

    def refusal(self) -> PushError | None:
        if self.shared is None or self.by_shared or self.verified:
            return None
        return PushError(401, self.proof.problem(self.body, self.shared) or "not authenticated")


# --- internals --------------------------------------------------------------------------------


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
