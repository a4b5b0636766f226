"""The one polling helper (`tests.support.cluster.eventually` / `aeventually`) and its one rule:
a check has passed when it returns a truthy value without raising."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.cluster import aeventually, eventually

NOT_YET = [False, None, {}, [], "", 0, set()]


@pytest.mark.parametrize("value", NOT_YET, ids=repr)
def test_a_falsy_answer_is_not_an_answer(value: Any) -> None:
    with pytest.raises(AssertionError, match="not true within"):
        eventually(lambda: value, timeout=0.1, interval=0.01)


@pytest.mark.parametrize("value", NOT_YET, ids=repr)
async def test_the_async_helper_has_the_same_rule(value: Any) -> None:
    async def check() -> Any:
        return value

    with pytest.raises(AssertionError, match="not true within"):
        await aeventually(check, timeout=0.1, interval=0.01)


def test_the_first_truthy_answer_is_returned_and_raising_means_not_yet() -> None:
    calls = iter([KeyError("gone"), None, {}, ({},), {"x": 1}])

    def check() -> Any:
        value = next(calls)
        if isinstance(value, Exception):
            raise value
        return value

    assert eventually(check, timeout=5, interval=0.001) == ({},)


async def test_an_empty_answer_is_given_back_wrapped() -> None:
    async def check() -> tuple[dict[str, Any]]:
        return ({},)

    (found,) = await aeventually(check, timeout=1)
    assert found == {}
