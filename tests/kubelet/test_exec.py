"""`kubectl exec` into a pod of the process node, through the embedded API server's `pods/exec`
relay to the kubelet's `/exec` (WebSockets, `v5.channel.k8s.io`)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import struct
import subprocess
import termios
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from localcluster.kubelet import netns, podnet
from tests.kubelet.conftest import LocalNode, eventually
from tests.kubelet.test_pods import make_pod, phase_is, raw_pod, shell
from tests.support import kubeletclient

_DECISION = podnet.decide(netns.read_facts())
needs_pod_network = pytest.mark.skipif(not _DECISION.pod_network, reason=_DECISION.reason)

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def running(core: Any, ns: str, name: str, containers: list[dict], **spec: Any) -> dict:
    make_pod(core, ns, name, containers, **spec)
    return eventually(lambda: phase_is(core, ns, name, "Running"), timeout=30)


def sleeper(name: str = "main", **extra: Any) -> dict:
    return shell(name, "sleep 300", **extra)


def test_exec_runs_in_the_containers_environment_and_working_directory(
    core, namespace, kubectl: Kubectl
) -> None:
    running(
        core,
        namespace,
        "env",
        [sleeper(env=[{"name": "GREETING", "value": "hello from the pod"}], workingDir="/work")],
    )
    out = kubectl("exec", "-n", namespace, "env", "--", "sh", "-c", 'echo "$GREETING"; pwd')
    greeting, cwd = out.stdout.splitlines()
    assert greeting == "hello from the pod"
    assert cwd.endswith("/root/work")


@needs_pod_network
def test_exec_sees_the_pods_hostname_and_hosts_file(
    core, namespace, kubectl: Kubectl, local_node: LocalNode
) -> None:
    pod = running(core, namespace, "named", [sleeper()])
    assert kubectl("exec", "-n", namespace, "named", "--", "hostname").stdout == "named\n"
    hosts = kubectl("exec", "-n", namespace, "named", "--", "cat", "/etc/hosts").stdout
    uid = pod["metadata"]["uid"]
    assert hosts == (local_node.data_dir / "pods" / uid / "etc-hosts").read_text()
    assert f"{pod['status']['podIP']}\tnamed" in hosts.splitlines()


def test_stdin_reaches_the_command_and_its_end_ends_it(core, namespace, kubectl: Kubectl) -> None:
    running(core, namespace, "cat", [sleeper()])
    text = "first line\nsecond line\n" + "x" * 100_000 + "\n"
    out = subprocess.run(
        [*_kubectl_argv(kubectl), "exec", "-i", "-n", namespace, "cat", "--", "cat"],
        input=text,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert out.stdout == text


def test_a_non_zero_exit_code_is_kubectls_exit_code(core, namespace, kubectl: Kubectl) -> None:
    running(core, namespace, "fails", [sleeper()])
    out = kubectl(
        "exec",
        "-n",
        namespace,
        "fails",
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 3",
        check=False,
    )
    assert out.returncode == 3
    assert out.stdout == "out\n"
    assert out.stderr.startswith("err\n")
    assert "command terminated with exit code 3" in out.stderr


def test_an_unknown_command_exits_127_with_the_reason(core, namespace, kubectl: Kubectl) -> None:
    running(core, namespace, "nocmd", [sleeper()])
    out = kubectl("exec", "-n", namespace, "nocmd", "--", "no-such-command", check=False)
    assert out.returncode == 127
    assert "no-such-command" in out.stderr


def test_exec_picks_the_named_container_and_refuses_unknown_ones(
    core, namespace, kubectl: Kubectl
) -> None:
    running(
        core,
        namespace,
        "two",
        [
            sleeper("a", env=[{"name": "WHO", "value": "a"}]),
            sleeper("b", env=[{"name": "WHO", "value": "b"}]),
        ],
    )
    out = kubectl("exec", "-n", namespace, "two", "-c", "b", "--", "sh", "-c", "echo $WHO")
    assert out.stdout == "b\n"
    bad = kubectl("exec", "-n", namespace, "two", "-c", "zzz", "--", "true", check=False)
    assert bad.returncode != 0
    assert "container zzz is not valid for pod two" in bad.stderr


def test_exec_into_a_missing_pod_or_a_stopped_container_says_why(
    core, namespace, kubectl: Kubectl
) -> None:
    missing = kubectl("exec", "-n", namespace, "ghost", "--", "true", check=False)
    assert missing.returncode != 0
    assert 'pods "ghost" not found' in missing.stderr
    make_pod(
        core, namespace, "mixed", [shell("done", "true"), sleeper("up")], restartPolicy="Never"
    )

    def done_finished() -> bool:
        statuses = raw_pod(core, namespace, "mixed").get("status", {}).get("containerStatuses")
        return any(
            s["name"] == "done" and "terminated" in s.get("state", {}) for s in statuses or []
        )

    eventually(done_finished, timeout=30)
    out = kubectl("exec", "-n", namespace, "mixed", "-c", "done", "--", "true", check=False)
    assert out.returncode != 0
    assert 'container "done" in pod "mixed" is not running' in out.stderr


def test_a_session_ends_when_the_pod_is_deleted(core, namespace, kubectl: Kubectl) -> None:
    running(core, namespace, "gone", [sleeper()], terminationGracePeriodSeconds=1)
    proc = subprocess.Popen(
        [*_kubectl_argv(kubectl), "exec", "-n", namespace, "gone", "--", "sleep", "301"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        eventually(lambda: "sleep 301" in _processes())  # the exec'd command runs
        core.delete_namespaced_pod("gone", namespace)
        proc.communicate(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    assert proc.returncode != 0
    eventually(lambda: "sleep 301" not in _processes())


def test_a_terminal_session_gets_a_tty_of_the_clients_size(
    core, namespace, kubectl: Kubectl
) -> None:
    running(core, namespace, "tty", [sleeper()])
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
    proc = subprocess.Popen(
        [*_kubectl_argv(kubectl), "exec", "-it", "-n", namespace, "tty", "--", "sh"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
    )
    os.close(slave)
    try:
        os.write(master, b"tty; stty size; exit 7\n")
        out = _read_until_exit(master, proc, timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        os.close(master)
    assert proc.returncode == 7
    assert "/dev/pts/" in out
    assert "33 101" in out


def _read_until_exit(master: int, proc: subprocess.Popen[bytes], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    chunks = []
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: kubectl exited and closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=max(deadline - time.monotonic(), 1))
    return b"".join(chunks).decode(errors="replace")


def _kubectl_argv(kubectl: Kubectl) -> list[str]:
    """kubectl with the node's kubeconfig, for the tests that drive the process themselves."""
    probe = kubectl("config", "view", "--minify", "-o", "jsonpath={.clusters[0].name}")
    assert probe.args[2]  # the fixture passes --kubeconfig FILE first
    return [str(a) for a in probe.args[:3]]


def _processes() -> list[str]:
    """Command lines of the machine's processes."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                out.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
    return [c.strip() for c in out]


def test_the_kubelets_exec_endpoint_needs_the_api_servers_certificate(
    core, namespace, local_node: LocalNode
) -> None:
    running(core, namespace, "guarded", [sleeper()])
    path = f"/exec/{namespace}/guarded/main?command=true&output=1"
    port = kubeletclient.node_port(local_node.kubeconfig, "trainops")
    kubeletclient.refused(port, path)
    pki_dir = local_node.data_dir / "pki"
    cert = (pki_dir / "kubelet-client.crt", pki_dir / "kubelet-client.key")
    # With the certificate but without a connection upgrade: a clear 400.
    status, body = kubeletclient.get(port, path, cert)
    assert status == 400
    assert b"exec needs a connection upgrade" in body


def test_exec_over_spdy_as_older_kubectls_speak_it(core, namespace, kubectl: Kubectl) -> None:
    """kubectl < 1.30 (here: websockets switched off) upgrades to SPDY/3.1: the embedded API
    server passes it through to the kubelet's SPDY side, which kube-apiserver also uses."""
    running(core, namespace, "old", [sleeper()])
    env = {**os.environ, "KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false"}
    argv = [*_kubectl_argv(kubectl), "exec", "-n", namespace, "old"]
    text = "over spdy\n" * 10_000
    echoed = subprocess.run(
        [*argv, "-i", "--", "cat"], input=text, capture_output=True, text=True, timeout=30, env=env
    )
    assert (echoed.returncode, echoed.stdout) == (0, text), echoed.stderr
    failed = subprocess.run(
        [*argv, "--", "sh", "-c", "echo out; echo err >&2; exit 4"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    assert (failed.returncode, failed.stdout) == (4, "out\n")
    assert failed.stderr.startswith("err\n")


def test_the_command_is_killed_when_the_client_goes_away(core, namespace, kubectl: Kubectl) -> None:
    running(core, namespace, "left", [sleeper()])
    proc = subprocess.Popen(
        [*_kubectl_argv(kubectl), "exec", "-n", namespace, "left", "--", "sleep", "302"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        eventually(lambda: "sleep 302" in _processes())
    finally:
        proc.kill()
        proc.wait()
    eventually(lambda: "sleep 302" not in _processes())
