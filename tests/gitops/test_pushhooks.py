"""Push webhooks: each provider with good and bad signatures, URL and branch normalization."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from gitops.source.pushhooks import PushCheck, PushError, parse_push, proof_of

SECRET = b"s3cret"
GITHUB = json.dumps(
    {
        "ref": "refs/heads/main",
        "after": "a" * 40,
        "repository": {
            "clone_url": "https://GitHub.com/Org/Repo.git",
            "ssh_url": "git@github.com:Org/Repo.git",
            "html_url": "https://github.com/Org/Repo",
        },
    }
).encode()
GITLAB = json.dumps(
    {
        "ref": "refs/heads/dev",
        "checkout_sha": "b" * 40,
        "project": {
            "git_http_url": "https://gitlab.example.com:443/g/p.git",
            "git_ssh_url": "ssh://git@gitlab.example.com:22/g/p.git",
            "web_url": "https://gitlab.example.com/g/p",
        },
    }
).encode()
GITEA = json.dumps(
    {
        "ref": "refs/tags/v1",
        "after": "c" * 40,
        "repository": {"clone_url": "http://gitea.local:3000/o/r.git/"},
    }
).encode()


def sig(body: bytes, secret: bytes = SECRET) -> str:
    return hmac.new(secret, body, hashlib.sha256).hexdigest()


def test_github_push_with_a_good_signature() -> None:
    event = parse_push(
        {"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + sig(GITHUB)}, GITHUB, SECRET
    )
    assert event.provider == "github"
    assert event.repo_urls == ("https://github.com/Org/Repo", "ssh://github.com/Org/Repo")
    assert (event.branch, event.commit) == ("main", "a" * 40)


def test_github_ping_is_ignored() -> None:
    body = b"{}"
    event = parse_push(
        {"X-GitHub-Event": "ping", "X-Hub-Signature-256": "sha256=" + sig(body)}, body, SECRET
    )
    assert event.ignored


def test_gitlab_push_with_the_token_and_default_ports_dropped() -> None:
    event = parse_push({"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "s3cret"}, GITLAB, SECRET)
    assert event.repo_urls == ("https://gitlab.example.com/g/p", "ssh://gitlab.example.com/g/p")
    assert (event.branch, event.commit) == ("dev", "b" * 40)


def test_gitea_and_forgejo_sign_without_a_prefix() -> None:
    event = parse_push({"X-Gitea-Event": "push", "X-Gitea-Signature": sig(GITEA)}, GITEA, SECRET)
    assert event.repo_urls == ("http://gitea.local:3000/o/r",)
    assert (event.branch, event.tag) == (None, "v1")
    event = parse_push(
        {"X-Forgejo-Event": "push", "X-Forgejo-Signature": sig(GITEA)}, GITEA, SECRET
    )
    assert event.provider == "forgejo"


def test_generic_json_with_a_branch() -> None:
    body = json.dumps({"repository": "git@host:a/b.git", "branch": "main"}).encode()
    event = parse_push({}, body, None)
    assert (event.provider, event.repo_urls, event.branch) == (
        "generic",
        ("ssh://host/a/b",),
        "main",
    )


BAD = {
    "github with a wrong signature": (
        {"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + sig(GITHUB, b"other")},
        GITHUB,
    ),
    "github without a signature": ({"X-GitHub-Event": "push"}, GITHUB),
    "gitlab with a wrong token": (
        {"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "nope"},
        GITLAB,
    ),
    "gitlab without a token": ({"X-Gitlab-Event": "Push Hook"}, GITLAB),
    "gitea with a wrong signature": (
        {"X-Gitea-Event": "push", "X-Gitea-Signature": sig(GITEA, b"x")},
        GITEA,
    ),
    "gitea without a signature": ({"X-Gitea-Event": "push"}, GITEA),
    "generic without a token": ({}, b'{"repository": "https://h/r"}'),
    # Raw bytes that are not UTF-8 reach aiohttp's headers as surrogates (was a 500).
    "github with a signature of bytes": (
        {"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=\udcff"},
        GITHUB,
    ),
    "gitlab with a token of bytes": (
        {"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "\udcff"},
        GITLAB,
    ),
    "gitea with a signature of bytes": (
        {"X-Gitea-Event": "push", "X-Gitea-Signature": "\udcff"},
        GITEA,
    ),
}


@pytest.mark.parametrize(("headers", "body"), BAD.values(), ids=BAD.keys())
def test_a_missing_or_wrong_signature_is_401_when_a_secret_is_configured(
    headers: dict[str, str], body: bytes
) -> None:
    with pytest.raises(PushError) as info:
        parse_push(headers, body, SECRET)
    assert info.value.status == 401


@pytest.mark.parametrize("body", [b"{not json", b"[1]", b'{"ref": "refs/heads/x"}'])
def test_bad_payloads_are_400(body: bytes) -> None:
    with pytest.raises(PushError) as info:
        parse_push({"X-GitHub-Event": "push"}, body, None)
    assert info.value.status == 400


# --- which repositories a push may trigger: the shared secret and each repository's own -------

OWN = b"team-a-own"
PROVED = {
    "github": ({"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + sig(GITHUB, OWN)}),
    "gitlab": ({"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": OWN.decode()}),
    "gitea": ({"X-Gitea-Event": "push", "X-Gitea-Signature": sig(GITHUB, OWN)}),
    "generic": ({"X-Hub-Signature-256": "sha256=" + sig(GITHUB, OWN)}),
    "generic token": ({"X-Trainops-Token": OWN.decode()}),
}


@pytest.mark.parametrize("headers", PROVED.values(), ids=PROVED.keys())
@pytest.mark.parametrize(
    ("shared", "own", "admitted", "refusal"),
    [
        # A repository with its own secret: that secret only, the shared one or none aside.
        (None, OWN, True, None),
        (SECRET, OWN, True, None),
        (None, b"another", False, None),
        (SECRET, b"another", False, 401),
        (None, b"", False, None),  # named, but unreadable or empty: nothing proves it
        (SECRET, b"", False, 401),
        # A repository without: the shared secret when set, else anything (as before).
        (None, None, True, None),
        (SECRET, None, False, 401),
        (OWN, None, True, None),  # the shared secret happens to be the value proved
    ],
)
def test_push_check_admits_a_repository_only_for_the_secret_it_names(
    headers: dict[str, str],
    shared: bytes | None,
    own: bytes | None,
    admitted: bool,
    refusal: int | None,
) -> None:
    check = PushCheck(proof_of(headers), GITHUB, shared)
    assert check.admits(own) is admitted
    problem = check.refusal()
    assert (problem.status if problem else None) == refusal


def test_a_repository_secret_proved_for_one_repository_admits_no_other() -> None:
    check = PushCheck(proof_of(PROVED["github"]), GITHUB, SECRET)
    assert [check.admits(s) for s in (b"another", OWN, None, b"")] == [False, True, False, False]
    assert check.refusal() is None  # proved: a 202 for the one it admitted


def test_an_unproved_request_is_refused_in_the_words_of_the_shared_secret() -> None:
    check = PushCheck(proof_of({"X-Gitlab-Event": "Push Hook"}), GITLAB, SECRET)
    assert not check.admits(OWN)
    refused = check.refusal()
    assert refused is not None and (refused.status, refused.message) == (401, "missing token")
