"""`terminated.message` comes from the termination-message file or, on error, the log's end."""

from __future__ import annotations

import pytest

from localcluster.kubelet.shim import termination_message

TAIL = [f"line {i}\n".encode() for i in range(100)]

CASES = {
    "the file wins": (b"boom: disk full", TAIL, "FallbackToLogsOnError", 1, "boom: disk full"),
    "File policy without a file says nothing": (b"", TAIL, "File", 1, ""),
    "fallback on error takes the last 80 lines": (
        b"",
        [b"a\n", b"b\n"],
        "FallbackToLogsOnError",
        2,
        "a\nb\n",
    ),
    "fallback never applies to a success": (b"", TAIL, "FallbackToLogsOnError", 0, ""),
}


@pytest.mark.parametrize(
    ("file_text", "tail", "policy", "code", "want"), CASES.values(), ids=CASES.keys()
)
def test_termination_message(
    file_text: bytes, tail: list[bytes], policy: str, code: int, want: str
) -> None:
    assert termination_message(file_text, tail, policy, code) == want


def test_the_fallback_is_capped_at_2048_bytes_and_80_lines() -> None:
    long = [b"x" * 100 + b"\n"] * 100
    message = termination_message(b"", long, "FallbackToLogsOnError", 1)
    assert len(message.encode()) == 2048
    few = termination_message(b"", TAIL, "FallbackToLogsOnError", 1)
    assert few.startswith("line 20\n") and few.endswith("line 99\n")


def test_the_file_is_capped_at_4096_bytes() -> None:
    assert len(termination_message(b"y" * 5000, [], "File", 1)) == 4096
