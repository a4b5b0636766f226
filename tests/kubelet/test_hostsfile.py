"""A pod's hosts file: its own names and what cluster DNS would answer for Services (pure)."""

from __future__ import annotations

from typing import Any

from localcluster.kubelet import hostsfile
from localcluster.kubelet.hostsfile import Endpoint
from localcluster.kubelet.names import write_in_place


def svc(name: str, ns: str = "ml", headless: bool = True, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"selector": {"replica": name}, **spec}
    if headless:
        body["clusterIP"] = "None"
    return {"metadata": {"name": name, "namespace": ns}, "spec": body}


def ep(name: str, ip: str, ready: bool = True, ns: str = "ml", **kw: Any) -> Endpoint:
    return Endpoint(ns, name, ip, ready, {"replica": name}, **kw)


def test_a_headless_service_answers_its_ready_pods() -> None:
    records = hostsfile.service_records(
        [svc("job-worker-0"), svc("job-worker-1")],
        [ep("job-worker-0", "10.244.0.2"), ep("job-worker-1", "10.244.0.3", ready=False)],
    )
    assert records == [("ml", "job-worker-0.ml.svc.cluster.local", "10.244.0.2")]


def test_not_ready_pods_are_published_when_the_service_asks() -> None:
    records = hostsfile.service_records(
        [svc("w", publishNotReadyAddresses=True)], [ep("w", "10.244.0.3", ready=False)]
    )
    assert records == [("ml", "w.ml.svc.cluster.local", "10.244.0.3")]


SKIPPED = {
    "no selector": {"metadata": {"name": "w", "namespace": "ml"}, "spec": {"clusterIP": "None"}},
    "ExternalName": svc("w", type="ExternalName"),
    "another namespace": svc("w", ns="other"),
}


def test_services_without_matching_pods_answer_nothing() -> None:
    for service in SKIPPED.values():
        assert hostsfile.service_records([service], [ep("w", "10.244.0.2")]) == []
    assert hostsfile.service_records([svc("w")], [ep("w", "")]) == []


def test_a_clusterip_service_answers_its_pods_too() -> None:
    records = hostsfile.service_records([svc("api", headless=False)], [ep("api", "10.244.0.9")])
    assert records == [("ml", "api.ml.svc.cluster.local", "10.244.0.9")]


def test_hostname_and_subdomain_give_a_pod_record() -> None:
    pod = Endpoint("ml", "w-0", "10.244.0.4", True, {"replica": "w"}, "box", "w")
    records = hostsfile.service_records([svc("w")], [pod])
    assert ("ml", "box.w.ml.svc.cluster.local", "10.244.0.4") in records


def test_the_hosts_file_names_the_pod_and_every_dns_form() -> None:
    me = ep("job-worker-0", "10.244.0.2")
    records = [
        ("ml", "job-ps-0.ml.svc.cluster.local", "10.244.0.5"),
        ("other", "db.other.svc.cluster.local", "10.244.0.6"),
    ]
    text = hostsfile.hosts_file(
        me, records, host_aliases=[{"ip": "10.244.0.7", "hostnames": ["a", "b"]}]
    )
    lines = text.splitlines()
    assert lines[0].startswith("# Kubernetes-managed hosts file")
    assert "127.0.0.1\tlocalhost" in lines
    assert "10.244.0.2\tjob-worker-0" in lines
    assert "10.244.0.7\ta\tb" in lines
    assert "10.244.0.5\tjob-ps-0.ml.svc.cluster.local job-ps-0.ml.svc job-ps-0.ml job-ps-0" in lines
    # Another namespace's Service needs its namespace in the name, as with a search path.
    assert "10.244.0.6\tdb.other.svc.cluster.local db.other.svc db.other" in lines


def test_a_pod_with_hostname_and_subdomain_names_itself_fully() -> None:
    me = Endpoint("ml", "w-0", "10.244.0.4", True, {}, "box", "w")
    text = hostsfile.hosts_file(me, [])
    assert "10.244.0.4\tbox.w.ml.svc.cluster.local\tbox" in text.splitlines()


def test_a_pod_without_an_address_yet_lists_only_localhost() -> None:
    text = hostsfile.hosts_file(ep("w-0", ""), [])
    assert "w-0" not in text and "127.0.0.1\tlocalhost" in text


def test_a_hosts_file_is_rewritten_in_place(tmp_path) -> None:
    path = tmp_path / "etc-hosts"
    write_in_place(path, "127.0.0.1\tlocalhost\n10.244.0.2\tlong-name-of-a-pod\n")
    inode = path.stat().st_ino
    write_in_place(path, "127.0.0.1\tlocalhost\n")  # shorter: the rest is cut off
    assert path.read_text() == "127.0.0.1\tlocalhost\n"
    assert path.stat().st_ino == inode  # a bind mount of it sees the new content
