"""`dashboard.login.safe_next`: where the login form may send the browser (pure, table-tested)."""

from __future__ import annotations

import pytest

from dashboard.login import safe_next


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, "/"),
        ("", "/"),
        ("/repositories/team-a/jobs", "/repositories/team-a/jobs"),
        ("/jobs?namespace=a", "/jobs?namespace=a"),
        ("jobs", "/"),
        ("https://evil.example/", "/"),
        ("//evil.example/", "/"),
        ("/\\evil.example/", "/"),
        # A browser strips tab, CR and LF from the Location it follows: //evil.example.
        ("/\t/evil.example/", "/"),
        ("/\n/evil.example/", "/"),
        ("/\r/evil.example/", "/"),
        # CR LF would be a header injection (aiohttp raises instead of answering).
        ("/\r\nSet-Cookie: x=1", "/"),
        ("/\x00", "/"),
        ("/\x7f", "/"),
    ],
)
def test_next_is_a_path_of_this_server_without_control_characters(
    given: str | None, expected: str
) -> None:
    assert safe_next(given) == expected
