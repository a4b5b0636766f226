"""The suite's `eventually`: a check that found nothing yet (False, an empty string or
collection) is polled again; None (a check that only asserts) and anything else pass."""

from __future__ import annotations

import pytest

from tests.support.cluster import aeventually, eventually


@pytest.mark.parametrize("nothing_yet", [False, [], {}, "", set(), ()])
def test_a_check_that_found_nothing_yet_is_polled_until_the_deadline(nothing_yet: object) -> None:
    with pytest.raises(AssertionError, match="not true within"):
        eventually(lambda: nothing_yet, timeout=0.1, interval=0.01)


def test_the_first_value_found_is_returned_and_none_passes() -> None:
    results = iter([[], [], ["created pod a"]])
    assert eventually(lambda: next(results), interval=0.01) == ["created pod a"]
    assert eventually(lambda: None) is None


async def test_the_async_form_polls_an_empty_list_again() -> None:
    results = iter([[], ["x"]])

    async def check() -> list[str]:
        return next(results)

    assert await aeventually(check, interval=0.01) == ["x"]
