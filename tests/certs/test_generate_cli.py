"""`trainops certs generate` refuses names no certificate should carry, absurd validities and
unusable output paths with one clear line, before writing anything; never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509

from certs import pki
from trainops.cli import main


@pytest.mark.parametrize(
    ("san", "problem"),
    [
        pytest.param("bad name", "'bad name' is not a DNS label", id="space"),
        pytest.param("a..b", "'' is not a DNS label", id="empty-label"),
        pytest.param("-web.svc", "'-web' is not a DNS label", id="leading-hyphen"),
        pytest.param("foo_bar.svc", "'foo_bar' is not a DNS label", id="underscore"),
        pytest.param("300.1.1.1", "not a valid IPv4 address", id="ipv4-out-of-range"),
        pytest.param("1.2.3.4/24", "a network (with /) cannot be", id="cidr"),
        pytest.param("ÿnicode.com", "must be ASCII", id="unicode"),
        pytest.param("a" * 64 + ".svc", "is not a DNS label", id="label-too-long"),
        pytest.param(".".join(["a" * 60] * 5), "at most 253 characters", id="name-too-long"),
        pytest.param("web.*.svc", "'*' is not a DNS label", id="inner-wildcard"),
    ],
)
def test_a_bad_san_is_refused_naming_it_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], san: str, problem: str
) -> None:
    out = tmp_path / "certs"
    assert main(["certs", "generate", "--out", str(out), f"--san={san}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trainops certs generate: --san {san!r}: ")
    assert problem in err
    assert not out.exists()


@pytest.mark.parametrize(
    "san",
    [
        pytest.param("trainops-webhook.trainops-system.svc", id="service-dns"),
        pytest.param("*.example.com", id="wildcard"),
        pytest.param("::1", id="ipv6"),
        pytest.param("10.0.0.7", id="ipv4"),
        pytest.param("Web-1.Example.COM", id="mixed-case"),
    ],
)
def test_good_sans_are_in_the_certificate(tmp_path: Path, san: str) -> None:
    assert main(["certs", "generate", "--out", str(tmp_path), "--san", san]) == 0
    cert = x509.load_pem_x509_certificate((tmp_path / pki.CERT_FILE).read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    values = [str(v) for v in names.get_values_for_type(x509.DNSName)]
    values += [str(v) for v in names.get_values_for_type(x509.IPAddress)]
    assert san in values


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        pytest.param("--days", "0", id="days-zero"),
        pytest.param("--days", "-5", id="days-negative"),
        pytest.param("--days", "100000000", id="days-past-year-9999"),
        pytest.param("--ca-days", "36501", id="ca-days-over-a-century"),
    ],
)
def test_a_validity_out_of_range_is_refused_with_the_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    assert main(["certs", "generate", "--out", str(tmp_path / "c"), flag, value]) == 2
    err = capsys.readouterr().err
    assert err == f"trainops certs generate: {flag} {value}: must be between 1 and 36500\n"


def test_an_out_path_that_is_a_file_is_refused_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "certs.pem"
    file.write_text("keep me")
    assert main(["certs", "generate", "--out", str(file)]) == 2
    assert capsys.readouterr().err == (
        f"trainops certs generate: --out {file} is not a directory\n"
    )
    assert file.read_text() == "keep me"


def test_an_out_path_under_a_file_names_the_path_not_an_errno(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("")
    assert main(["certs", "generate", "--out", str(tmp_path / "file" / "sub")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("trainops certs generate: cannot write ")
    assert err.endswith(": Not a directory\n")
    assert "Errno" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["--ca-file", "{tmp}/missing.crt"],
            "--ca-file {tmp}/missing.crt: No such file or directory",
            id="missing-ca-file",
        ),
        pytest.param(
            ["--ca-file", "{tmp}/notes.txt"],
            "--ca-file {tmp}/notes.txt: no PEM certificate found",
            id="ca-file-without-pem",
        ),
        pytest.param(
            ["--ca-file", "{tmp}/ca.crt", "--kubeconfig", "{tmp}/missing-kubeconfig"],
            "--kubeconfig {tmp}/missing-kubeconfig: no such file",
            id="missing-kubeconfig",
        ),
    ],
)
def test_inject_names_the_flag_whose_file_is_unusable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["certs", "generate", "--out", str(tmp_path)]) == 0
    (tmp_path / "notes.txt").write_text("hello\n")
    capsys.readouterr()
    argv = [a.format(tmp=tmp_path) for a in args]
    assert main(["certs", "inject", *argv]) == 2
    assert capsys.readouterr().err == f"trainops certs inject: {message.format(tmp=tmp_path)}\n"


def test_existing_certificates_are_kept_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["certs", "generate", "--out", str(tmp_path)]) == 0
    ca = (tmp_path / pki.CA_FILE).read_bytes()
    capsys.readouterr()
    assert main(["certs", "generate", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"trainops certs generate: {tmp_path} already holds ca.crt, tls.crt, tls.key; use "
        "--force to replace them (clients trusting the old CA will then fail)\n"
    )
    assert (tmp_path / pki.CA_FILE).read_bytes() == ca
    assert main(["certs", "generate", "--out", str(tmp_path), "--force"]) == 0
    assert (tmp_path / pki.CA_FILE).read_bytes() != ca
