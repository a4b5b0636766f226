"""gitops.engine.redact: the one masking function, table-tested."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from gitops.engine.redact import RedactingFormatter, printable, redact, redact_value

MASKED = {
    "https user and password": (
        "https://x-access-token:ghp_SECRET@github.com/org/repo.git",
        "https://***@github.com/org/repo.git",
    ),
    "https token as the user": (
        "https://ghp_SECRET@github.com/org/repo.git",
        "https://***@github.com/org/repo.git",
    ),
    "http, upper-case scheme": ("HTTP://u:SECRET@host/r", "HTTP://***@host/r"),
    "a password with an unescaped @": (
        "https://u:p@SECRET@host/r.git",
        "https://***@host/r.git",
    ),
    "ssh password": ("ssh://git:SECRET@host:2222/r.git", "ssh://git:***@host:2222/r.git"),
    "ssh password with a colon in it": ("ssh://git:a:SECRET@host/r", "ssh://git:***@host/r"),
    "access_token query": (
        "https://host/r.git?access_token=SECRET",
        "https://host/r.git?access_token=***",
    ),
    "private_token query, other parameters kept": (
        "https://host/r.git?ref=main&private_token=SECRET&depth=1",
        "https://host/r.git?ref=main&private_token=***&depth=1",
    ),
    "token query, any case, before a fragment": (
        "https://host/r.git?Token=SECRET#frag",
        "https://host/r.git?Token=***#frag",
    ),
    "HTML-escaped ampersand": (
        "https://host/r?a=1&amp;token=SECRET",
        "https://host/r?a=1&amp;token=***",
    ),
    "both at once, in a git message with quotes": (
        "fatal: unable to access 'https://u:SECRET@host/r.git?token=SECRET/': 404",
        "fatal: unable to access 'https://***@host/r.git?token=***': 404",
    ),
    "two URLs on one line, only the second has userinfo": (
        "from https://a.example/x to https://u:SECRET@b.example/y",
        "from https://a.example/x to https://***@b.example/y",
    ),
    "inside JSON": (
        '{"repoURL": "ssh://me:SECRET@h/r"}',
        '{"repoURL": "ssh://me:***@h/r"}',
    ),
}

KEPT = {
    "plain https": "https://github.com/org/repo.git",
    "ssh user alone": "ssh://git@github.com/org/repo.git",
    "scp-like": "git@github.com:org/repo.git",
    "an @ in the path": "https://host/org/repo@v1",
    "an e-mail address": "written by ada@example.com",
    "a parameter that only ends in token": "https://host/r?csrf_token=abc&xtoken=1",
    "a token word outside a query": "token=abc in a sentence",
    "empty": "",
}


@pytest.mark.parametrize(("text", "want"), MASKED.values(), ids=MASKED.keys())
def test_credentials_in_urls_are_masked(text: str, want: str) -> None:
    assert redact(text) == want
    assert "SECRET" not in redact(text)


@pytest.mark.parametrize("text", KEPT.values(), ids=KEPT.keys())
def test_text_without_credentials_is_unchanged(text: str) -> None:
    assert redact(text) == text


def test_masking_is_idempotent() -> None:
    for text, want in MASKED.values():
        assert redact(want) == want, text


def test_redact_value_masks_every_string_in_nested_data_and_leaves_the_input_alone() -> None:
    obj: dict[str, Any] = {
        "spec": {"repoURL": "https://u:SECRET@h/r", "interval": 30},
        "status": {"conditions": [{"message": "git failed: https://h/r?private_token=SECRET"}]},
    }
    out = redact_value(obj)
    assert out == {
        "spec": {"repoURL": "https://***@h/r", "interval": 30},
        "status": {"conditions": [{"message": "git failed: https://h/r?private_token=***"}]},
    }
    assert obj["spec"]["repoURL"] == "https://u:SECRET@h/r"


def test_the_log_formatter_masks_message_arguments_and_traceback() -> None:
    formatter = RedactingFormatter("%(levelname)s %(message)s")
    try:
        raise RuntimeError("cannot fetch ssh://git:SECRET@h/r")
    except RuntimeError as e:
        record = logging.LogRecord(
            "x", logging.WARNING, __file__, 1, "fetching %s", ("https://h/r?token=SECRET",),
            (type(e), e, e.__traceback__),
        )  # fmt: skip
    text = formatter.format(record)
    assert text.startswith("WARNING fetching https://h/r?token=***\n")
    assert "ssh://git:***@h/r" in text
    assert "SECRET" not in text


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("esc\x1b]0;pwned\x07\x1b[2J.yaml", "esc\\x1b]0;pwned\\x07\\x1b[2J.yaml"),
        ("line one\nline\ttwo", "line one\nline\ttwo"),
        ("csi\x9bx del\x7f nul\x00", "csi\\x9bx del\\x7f nul\\x00"),
        ("jobs/ünïcode.yaml", "jobs/ünïcode.yaml"),
    ],
)
def test_printable_shows_control_characters_instead_of_sending_them(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_the_log_formatter_neither_leaks_credentials_nor_passes_terminal_escapes() -> None:
    record = logging.LogRecord(
        "t",
        logging.WARNING,
        __file__,
        1,
        "denied: %s at %s",
        ("e\x1b[2J.yaml", "https://u:pw@h/r"),
        None,
    )
    line = RedactingFormatter("%(message)s").format(record)
    assert line == "denied: e\\x1b[2J.yaml at https://***@h/r"
