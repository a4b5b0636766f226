"""Volumes are planned from the pod and materialised under the pod's root."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from localcluster.kubelet.volumes import (
    materialise,
    plan_volumes,
    rewrite_env_value,
    rewrite_path,
    token_requests,
)

CMS = {"cfg": {"data": {"app.yaml": "a: 1\n", "other": "x"}}}
SECRETS = {"creds": {"data": {"token": base64.b64encode(b"s3cret").decode()}}}


def pod(volumes: list[dict], mounts: list[dict]) -> dict:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {"volumes": volumes, "containers": [{"name": "c", "volumeMounts": mounts}]},
    }


def test_config_map_secret_and_empty_dir_volumes_appear_at_their_mount_paths(
    tmp_path: Path,
) -> None:
    p = pod(
        [
            {
                "name": "cfg",
                "configMap": {
                    "name": "cfg",
                    "items": [{"key": "app.yaml", "path": "conf/app.yaml"}],
                },
            },
            {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o400}},
            {"name": "shm", "emptyDir": {"medium": "Memory"}},
        ],
        [
            {"name": "cfg", "mountPath": "/etc/config"},
            {"name": "creds", "mountPath": "/var/run/creds"},
            {"name": "shm", "mountPath": "/dev/shm"},
        ],
    )
    plan = plan_volumes(p, config_maps=CMS, secrets=SECRETS)
    assert not isinstance(plan, str)
    materialise(plan, pod_dir=tmp_path / "pod", data_dir=tmp_path)
    root = tmp_path / "pod" / "root"
    assert (root / "etc/config/conf/app.yaml").read_text() == "a: 1\n"
    assert not (root / "etc/config/other").exists()
    token = root / "var/run/creds/token"
    assert token.read_bytes() == b"s3cret"
    assert os.stat(token).st_mode & 0o777 == 0o400
    (root / "dev/shm/x").write_text("shared")
    assert (tmp_path / "pod/volumes/shm/x").read_text() == "shared"


def test_a_missing_config_map_is_an_error_unless_optional() -> None:
    vol = [{"name": "cfg", "configMap": {"name": "nope"}}]
    mounts = [{"name": "cfg", "mountPath": "/etc/config"}]
    assert plan_volumes(pod(vol, mounts), config_maps={}, secrets={}) == (
        'MountVolume.SetUp failed for volume "cfg" : configmap "nope" not found'
    )
    vol[0]["configMap"]["optional"] = True
    assert not isinstance(plan_volumes(pod(vol, mounts), config_maps={}, secrets={}), str)


def test_unsupported_volume_types_are_refused_by_name() -> None:
    result = plan_volumes(
        pod([{"name": "n", "nfs": {"server": "x"}}], []), config_maps={}, secrets={}
    )
    assert result == 'volume "n": type nfs is not supported by the local kubelet'


def test_claims_get_a_directory_that_outlives_the_pod(tmp_path: Path) -> None:
    p = pod(
        [{"name": "data", "persistentVolumeClaim": {"claimName": "ds"}}],
        [{"name": "data", "mountPath": "/data", "subPath": "train"}],
    )
    plan = plan_volumes(p, config_maps={}, secrets={})
    assert not isinstance(plan, str)
    materialise(plan, pod_dir=tmp_path / "pod", data_dir=tmp_path)
    (tmp_path / "pod/root/data/f").write_text("1")
    assert (tmp_path / "volumes/ns/ds/train/f").read_text() == "1"


def test_arguments_naming_mounted_paths_are_rewritten_under_the_root() -> None:
    mounts = ["/scripts", "/etc/config"]
    assert rewrite_path("/scripts/train.py", "/r", mounts) == "/r/scripts/train.py"
    assert rewrite_path("/scripts", "/r", mounts) == "/r/scripts"
    assert rewrite_path("/scriptsX", "/r", mounts) == "/scriptsX"
    assert rewrite_path("--lr=0.1", "/r", mounts) == "--lr=0.1"


def test_item_paths_cannot_escape_the_volume() -> None:
    vol = [
        {
            "name": "cfg",
            "configMap": {"name": "cfg", "items": [{"key": "other", "path": "../../x"}]},
        }
    ]
    result = plan_volumes(pod(vol, []), config_maps=CMS, secrets={})
    assert result == 'volume "cfg": item path \'../../x\' must be relative, without ".."'


def test_downward_api_and_projected_volumes_write_the_pods_facts_and_objects(
    tmp_path: Path,
) -> None:
    p = pod(
        [
            {
                "name": "info",
                "downwardAPI": {
                    "items": [
                        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                        {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}},
                        {"path": "team", "fieldRef": {"fieldPath": "metadata.labels['team']"}},
                    ]
                },
            },
            {
                "name": "all",
                "projected": {
                    "defaultMode": 0o440,
                    "sources": [
                        {"configMap": {"name": "cfg", "items": [{"key": "other", "path": "o"}]}},
                        {"secret": {"name": "creds"}},
                        {
                            "downwardAPI": {
                                "items": [
                                    {"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}
                                ]
                            }
                        },
                    ],
                },
            },
        ],
        [{"name": "info", "mountPath": "/etc/info"}, {"name": "all", "mountPath": "/etc/all"}],
    )
    p["metadata"]["labels"] = {"team": "ml", "app": "tb"}
    plan = plan_volumes(p, config_maps=CMS, secrets=SECRETS)
    assert not isinstance(plan, str)
    materialise(plan, pod_dir=tmp_path / "pod", data_dir=tmp_path)
    root = tmp_path / "pod" / "root"
    assert (root / "etc/info/labels").read_text() == 'app="tb"\nteam="ml"'
    assert (root / "etc/info/name").read_text() == "p"
    assert (root / "etc/info/team").read_text() == "ml"
    assert sorted(f.name for f in (root / "etc/all").iterdir()) == ["ns", "o", "token"]
    assert (root / "etc/all/token").read_bytes() == b"s3cret"
    assert (root / "etc/all/ns").read_text() == "ns"
    assert os.stat(root / "etc/all/o").st_mode & 0o777 == 0o440


def test_a_service_account_token_source_holds_the_token_the_kubelet_requested(
    tmp_path: Path,
) -> None:
    """A real API server adds `kube-api-access-*` (token, CA, namespace) to every pod."""
    vol = [
        {
            "name": "kube-api-access",
            "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
        }
    ]
    p = pod(vol, [{"name": "kube-api-access", "mountPath": "/var/run/secrets/sa"}])
    assert token_requests(p) == [("kube-api-access/token", None, 3600)]
    assert plan_volumes(p, config_maps={}, secrets={}) == (
        'volume "kube-api-access": no token for the pod\'s service account yet'
    )
    plan = plan_volumes(p, config_maps={}, secrets={}, tokens={"kube-api-access/token": "jwt"})
    assert not isinstance(plan, str)
    materialise(plan, pod_dir=tmp_path / "pod", data_dir=tmp_path)
    assert (tmp_path / "pod/root/var/run/secrets/sa/token").read_text() == "jwt"


def test_projected_sources_the_local_kubelet_cannot_make_are_refused_by_name() -> None:
    vol = [
        {
            "name": "bundle",
            "projected": {"sources": [{"clusterTrustBundle": {"path": "ca.crt"}}]},
        }
    ]
    assert plan_volumes(pod(vol, []), config_maps={}, secrets={}) == (
        'volume "bundle": projected source clusterTrustBundle is not supported by the local '
        "kubelet (configMap, secret, downwardAPI and serviceAccountToken are)"
    )


def test_secret_and_token_files_are_never_readable_by_other_users(tmp_path: Path) -> None:
    """Other local users are not the pod (which runs as the kubelet's user): the mode asked for
    is kept less its bits for others, and the volume directories are 0700."""
    p = pod(
        [
            {"name": "creds", "secret": {"secretName": "creds"}},
            {
                "name": "sa",
                "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
            },
        ],
        [{"name": "creds", "mountPath": "/etc/creds"}, {"name": "sa", "mountPath": "/var/sa"}],
    )
    plan = plan_volumes(p, config_maps={}, secrets=SECRETS, tokens={"sa/token": "jwt"})
    assert not isinstance(plan, str)
    materialise(plan, pod_dir=tmp_path / "pod", data_dir=tmp_path)
    volumes = tmp_path / "pod" / "volumes"
    assert os.stat(volumes / "creds" / "token").st_mode & 0o777 == 0o640  # defaultMode 0644
    assert os.stat(volumes / "sa" / "token").st_mode & 0o777 == 0o640
    assert (tmp_path / "pod/root/var/sa/token").read_text() == "jwt"
    for name in ("creds", "sa"):
        assert os.stat(volumes / name).st_mode & 0o777 == 0o700


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("/trainops", "/r/trainops"),
        ("/trainops:/usr/lib/python3", "/r/trainops:/usr/lib/python3"),
        ("/opt/x:/scripts/lib", "/opt/x:/r/scripts/lib"),
        ("https://10.0.0.1:8443/v1/progress", "https://10.0.0.1:8443/v1/progress"),
        ('{"cluster": {"worker": ["w-0:2222"]}}', '{"cluster": {"worker": ["w-0:2222"]}}'),
        ("/trainopsx", "/trainopsx"),
    ],
)
def test_an_env_value_naming_a_mount_path_is_mapped_as_an_argument_is(
    value: str, shown: str
) -> None:
    assert rewrite_env_value(value, "/r", ["/trainops", "/scripts"]) == shown
