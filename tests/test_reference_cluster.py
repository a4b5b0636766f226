"""hack/reference-cluster's pure parts: loopback-only command lines, credentials made once, an
admin kubeconfig the test fixtures read, the build stamp, a clear error without binaries, and
the build lock (two builds at once, with a stand-in for `go`).
(Starting the real control plane is exercised by CI's reference tier, hack/reference-tests.)"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from cryptography import x509

from tests.support.cluster import _from_kubeconfig, eventually

SCRIPT = Path(__file__).resolve().parents[1] / "hack" / "reference_cluster.py"
TARGET_NAMES = ("etcd", "kube-apiserver", "kube-controller-manager")


@pytest.fixture(scope="module")
def ref() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reference_cluster", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def test_every_component_listens_and_connects_on_loopback_only(
    ref: ModuleType, tmp_path: Path
) -> None:
    argv = ref.commands(Path("/opt/bin"), tmp_path, ref.Ports(2379, 2380, 6443))
    assert list(argv) == ["etcd", "kube-apiserver", "kube-controller-manager"]
    # Every flag but the service-account issuer, which is a name in tokens, not an address.
    flags = [
        flag
        for command in argv.values()
        for flag in command[1:]
        if not flag.startswith("--service-account-issuer=")
    ]
    urls = [u for flag in flags for u in re.findall(r"https?://[^,\s]+", flag)]
    assert urls and all(u.startswith("http://127.0.0.1:") for u in urls)
    addresses = [f.split("=", 1)[1] for f in flags if f.startswith(("--bind-", "--advertise-a"))]
    assert addresses == ["127.0.0.1", "127.0.0.1", "127.0.0.1"]
    assert "--secure-port=6443" in argv["kube-apiserver"]
    assert "--authorization-mode=Node,RBAC" in argv["kube-apiserver"]
    assert "--secure-port=0" in argv["kube-controller-manager"]


def test_credentials_are_made_once_and_reused_by_a_restart(ref: ModuleType, tmp_path: Path) -> None:
    admin, kcm = ref.write_credentials(tmp_path)
    ca = (tmp_path / "ca.crt").read_bytes()
    assert ref.write_credentials(tmp_path) == (admin, kcm)
    assert (tmp_path / "ca.crt").read_bytes() == ca
    rows = (tmp_path / "tokens.csv").read_text().splitlines()
    assert rows[0] == f'{admin},admin,admin-uid,"system:masters"'
    assert rows[1] == f"{kcm},system:kube-controller-manager,kcm-uid"
    serving = x509.load_pem_x509_certificate((tmp_path / "apiserver.crt").read_bytes())
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "kubernetes.default.svc" in sans.get_values_for_type(x509.DNSName)
    assert {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)} >= {
        "127.0.0.1",
        ref.SERVICE_IP,
    }
    assert (tmp_path / "sa.key").stat().st_mode & 0o077 == 0


def test_the_admin_kubeconfig_is_what_the_test_fixture_reads(
    ref: ModuleType, tmp_path: Path
) -> None:
    admin, _ = ref.write_credentials(tmp_path)
    ca = (tmp_path / "ca.crt").read_bytes()
    path = tmp_path / "kubeconfig"
    config = ref.kubeconfig("https://127.0.0.1:6443", ca, admin, "admin")
    path.write_text(yaml.safe_dump(config))
    cluster = _from_kubeconfig(path)
    assert (cluster.url, cluster.token) == ("https://127.0.0.1:6443", admin)
    assert cluster.ca_file.read_bytes() == ca


def test_the_build_stamp_follows_the_go_toolchain(ref: ModuleType) -> None:
    a = ref.build_stamp("go version go1.26.8 linux/amd64")
    assert a == ref.build_stamp("go version go1.26.8 linux/amd64")
    assert a != ref.build_stamp("go version go1.27.0 linux/amd64")


def test_start_without_binaries_says_to_build_first(
    ref: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TRAINOPS_REFERENCE_BIN", str(tmp_path / "empty"))
    assert ref.main(["start", str(tmp_path / "cluster")]) == 1
    err = capsys.readouterr().err
    assert "etcd, kube-apiserver, kube-controller-manager not found" in err
    assert "run `hack/reference-cluster build` first" in err
    assert not (tmp_path / "cluster").exists()


FAKE_GO = """#!/bin/sh
# A stand-in for `go`: `go version`, and `go build ... -o OUT PKG`, which records that it ran,
# waits (bounded) until the test opens the gate file, and writes OUT.
if [ "$1" = version ]; then echo "go version go0.0-fake linux/amd64"; exit 0; fi
while [ "$#" -gt 0 ]; do
  if [ "$1" = -o ]; then out="$2"; fi
  shift
done
echo "$out" >> "$FAKE_GO_RAN"
i=0
while [ ! -e "$FAKE_GO_GATE" ] && [ "$i" -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
echo fake > "$out"
"""


def test_a_second_build_waits_for_the_first_and_then_finds_it_done(tmp_path: Path) -> None:
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "go").write_text(FAKE_GO)
    (fake_bin / "go").chmod(0o755)
    ran, gate, cache = tmp_path / "ran", tmp_path / "gate", tmp_path / "cache"
    env = {
        **os.environ,
        "PATH": f"{fake_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "TRAINOPS_REFERENCE_CACHE": str(cache),
        "FAKE_GO_RAN": str(ran),
        "FAKE_GO_GATE": str(gate),
    }
    logs = [tmp_path / "first.log", tmp_path / "second.log"]
    builds: list[subprocess.Popen[bytes]] = []
    try:
        for log in logs:
            with log.open("wb") as out:
                builds.append(
                    subprocess.Popen(
                        [sys.executable, str(SCRIPT), "build"],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env=env,
                    )
                )
            if len(builds) == 1:
                eventually(ran.exists, timeout=30)  # the first is compiling: it holds the lock
        eventually(lambda: "waiting for it" in logs[1].read_text(), timeout=30)
        assert ran.read_text().count("\n") == 1  # the second waits rather than compiling
        gate.touch()
        codes = [b.wait(timeout=60) for b in builds]
    finally:
        for b in builds:
            if b.poll() is None:
                b.kill()
                b.wait(timeout=10)
    first, second = (log.read_text() for log in logs)
    assert codes == [0, 0], first + second
    assert "built reference binaries v1.32.13" in first
    assert "another build of the reference binaries is running" in second
    assert "up to date" in second and "building" not in second
    # Each target compiled once, by the first build, and renamed into place.
    assert ran.read_text().splitlines() == [str(cache / f".{n}.tmp") for n in TARGET_NAMES]
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".")) == sorted(
        TARGET_NAMES
    )
