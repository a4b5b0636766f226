"""The exec stream protocol's pure parts: options, frames, resize messages, statuses."""

from __future__ import annotations

import pytest

from localcluster.kubelet import remotecommand as rc

OPTION_CASES = {
    "kubelet names (what kube-apiserver sends)": (
        {"input": "1", "output": "1", "tty": "1"},
        ["sh"],
        rc.ExecOptions(("sh",), stdin=True, stdout=True, stderr=False, tty=True),
    ),
    "pods/exec names (what kubectl sends)": (
        {"stdout": "true", "stderr": "true"},
        ["ls", "-l"],
        rc.ExecOptions(("ls", "-l"), stdin=False, stdout=True, stderr=True, tty=False),
    ),
    "false values are false": (
        {"stdin": "false", "stdout": "true", "tty": "false"},
        ["true"],
        rc.ExecOptions(("true",), stdin=False, stdout=True, stderr=False, tty=False),
    ),
    "no command": (
        {"stdout": "1"},
        [],
        "you must specify a command to run (the command parameter)",
    ),
    "no stream": ({}, ["true"], "you must specify at least 1 of stdin, stdout, stderr"),
    "tty with stderr": (
        {"output": "1", "error": "1", "tty": "1"},
        ["sh"],
        "stderr cannot be requested with a tty: both go to the terminal",
    ),
}


@pytest.mark.parametrize(("query", "commands", "want"), OPTION_CASES.values(), ids=OPTION_CASES)
def test_exec_options_are_read_from_either_set_of_names(query, commands, want) -> None:
    assert rc.parse_exec_options(query, commands) == want


def test_a_frame_is_its_channel_byte_and_payload() -> None:
    assert rc.frame(rc.STDOUT, b"hi") == b"\x01hi"
    assert rc.parse_frame(b"\x00abc") == (rc.STDIN, b"abc")
    assert rc.parse_frame(b"\xff\x00") == (rc.CHANNEL_CLOSE, b"\x00")
    assert rc.parse_frame(b"") is None


RESIZE_CASES = {
    "a size": (b'{"Width":80,"Height":24}', (80, 24)),
    "with a newline": (b'{"Width":120,"Height":40}\n', (120, 40)),
    "zero (unknown) size": (b'{"Width":0,"Height":0}', None),
    "not JSON": (b"80x24", None),
    "strings": (b'{"Width":"80","Height":"24"}', None),
    "too large": (b'{"Width":70000,"Height":24}', None),
}


@pytest.mark.parametrize(("payload", "want"), RESIZE_CASES.values(), ids=RESIZE_CASES)
def test_resize_messages(payload: bytes, want) -> None:
    assert rc.parse_resize(payload) == want


def test_exit_zero_is_success_and_other_codes_carry_the_code_as_a_cause() -> None:
    assert rc.exit_status(["true"], 0) == {"metadata": {}, "status": "Success"}
    assert rc.exit_status(["sh", "-c", "exit 3"], 3) == {
        "metadata": {},
        "status": "Failure",
        "message": "command terminated with non-zero exit code: error executing command "
        "[sh -c exit 3], exit code 3",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": "3"}]},
    }


def test_an_error_response_is_a_status_object_with_its_code() -> None:
    assert rc.failure("nope", reason="NotFound", code=404) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "nope",
        "reason": "NotFound",
        "code": 404,
    }
