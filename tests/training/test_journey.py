"""A user's journey watching training (issue #30), walked end to end in one test.

The TensorFlow example (examples/training/tensorflow-mwms.yaml, two workers in sync) is in a
real git repository, with the reporter it imports as a ConfigMap; `trainops up --repo` syncs
it (with `TRAINOPS_TEST_KUBECONFIG`: `up --kubeconfig --node` on that cluster). Then, as a user:

1. the job page's loss curve gains points while it trains, the progress line shows an ETA,
   and `kubectl get tfj` shows PROGRESS and ETA;
2. a worker's process is killed (SIGKILL, by the pid the process node recorded: these pods
   have no PID namespace, so `kubectl exec … kill 1` is not the way here) — the dashboard lists
   the failed run with exit code 137 and its log opens there, and `kubectl logs --previous`
   shows the same;
3. the job finishes Succeeded;
4. `kubectl delete tfj` — the repository records the finished job, says so on its page, and
   later commits leave it deleted.

Real training: needs TRAINOPS_TRAINING_PYTHON (hack/training-tests), root and the CNI plugins
(pods in their own network namespaces), kubectl and Debian's chromium; skips, saying which,
without them (under CI=true a missing tool fails: tests/support/ci_skips.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.dashboard.conftest import CHROMIUM, VIEWPORT, Dashboard, api_url, launch_chromium
from tests.gitops.conftest import Remote
from tests.training.test_examples_train import EXAMPLES, TRAINING_PYTHON, needs_training_python
from tests.up.conftest import Up, eventually, finish

pytestmark = [needs_training_python, pytest.mark.slow, pytest.mark.timeout(900)]

JOB = "tf-mwms"
JOB_PAGE = f"/jobs/default/tensorflowtrainingjobs/{JOB}"
EPOCHS = 600
LIVE = 60_000  # ms: a page waiting for live updates


def _reporter_config_map() -> str:
    """What `kubectl create configmap trainops-progress --from-file=trainops_progress.py
    --dry-run=client -o yaml` writes: the reporter, kept in Git beside the job."""
    reporter = EXAMPLES.parents[1] / "trainops_progress.py"
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "trainops-progress"},
            "data": {"trainops_progress.py": reporter.read_text()},
        }
    )


def _example_training_longer() -> str:
    """The example as a user's copy of it that trains long enough to watch: 600 epochs of 20
    steps, 45-110 s on two CPU workers here (the example trains 5: a few seconds). With 200 the
    fastest runs (15 s) ended before the page showed an ETA or before a worker was killed."""
    text = (EXAMPLES / "tensorflow-mwms.yaml").read_text()
    command = '              command: ["python3", "/scripts/train.py"]\n'
    assert text.count(command) == 1
    return text.replace(command, command + f'              args: ["--epochs", "{EPOCHS}"]\n')


class Journey(Dashboard):
    @property
    def token(self) -> str:
        """The API's token from `DATA_DIR/api.json`: `up`'s own on the embedded server, the
        kubeconfig's (a user's Kubernetes token) on a real cluster."""
        token: str = json.loads((self.up.data_dir / "api.json").read_text())["token"]
        return token


@pytest.fixture(scope="module")
def journey(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Journey]:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    if not CHROMIUM.exists():
        pytest.skip(f"chromium is not installed ({CHROMIUM}: Debian's chromium package)")
    assert TRAINING_PYTHON is not None
    venv = Path(TRAINING_PYTHON).parent.parent
    root = tmp_path_factory.mktemp("journey")
    remote = Remote(root / "remote")
    first = remote.commit(
        "The TensorFlow example and the progress reporter",
        {
            "jobs/tensorflow-mwms.yaml": _example_training_longer(),
            "jobs/trainops-progress.yaml": _reporter_config_map(),
        },
    )
    up = Up(root / "data")
    # On a real cluster: what the tier's other tests made by hand (test_train_under_up.py) the
    # repository would refuse to adopt (docs/GITOPS.md), and what it applied stays after `up`
    # (a repository's objects outlive it) for them to trip over.
    names = ("tf-mwms-script", "trainops-progress")
    if up.external is not None:
        _kubectl(up, "delete", "configmap", *names, "--ignore-not-found")
    up.start(
        timeout=90,
        args=(
            *("--repo", remote.url, "--path", "jobs"),
            *("--image", f"tensorflow/tensorflow:*={venv}"),
        ),
    )
    banner = "".join(up.output)
    if "pod network none:" in banner:
        reason = banner.split("pod network none:", 1)[1].splitlines()[0].strip()
        finish(up)
        pytest.skip(f"pods share the host's network here, so replicas cannot train: {reason}")
    try:
        yield Journey(up, remote, api_url(up), first)
    finally:
        finish(up)
        if up.external is not None:
            _kubectl(up, "delete", "configmap", *names, "--ignore-not-found")


def _kubectl(up: Up, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(up.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 or not check, done.stderr
    return done


def _status(up: Up) -> dict[str, Any]:
    job = json.loads(_kubectl(up, "get", "tfj", JOB, "-o", "json").stdout)
    return dict(job.get("status") or {})


def _not_failed(up: Up) -> dict[str, Any]:
    status = _status(up)
    assert status.get("phase") != "Failed", (status, _kubectl(up, "get", "pods", "-o", "wide"))
    return status


def _kill(up: Up, pod: str) -> int:
    """SIGKILL the pod's running training process: the pid the process node recorded for the
    container's current run (DATA_DIR/pods/<uid>/containers/tensorflow/<run>/pid.json)."""
    uid = _kubectl(up, "get", "pod", pod, "-o", "jsonpath={.metadata.uid}").stdout
    runs = sorted(
        up.data_dir.rglob(f"pods/{uid}/containers/tensorflow/*/pid.json"),
        key=lambda p: int(p.parent.name),
    )
    assert runs, f"no process recorded for {pod} ({uid})"
    pid = int(json.loads(runs[-1].read_text())["pid"])
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    assert "/scripts/train.py" in cmdline, cmdline  # that process, not a reused pid
    os.kill(pid, signal.SIGKILL)
    return pid


def test_a_user_watches_training_kills_a_worker_and_deletes_the_finished_job(
    journey: Journey,
) -> None:
    from playwright.sync_api import expect, sync_playwright

    up = journey.up
    started = time.monotonic()
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
        context.set_default_timeout(15_000)
        page = context.new_page()
        problems: list[str] = []
        page.on("pageerror", lambda error: problems.append(f"uncaught error: {error}"))
        page.on(
            "console",
            lambda m: problems.append(f"CSP: {m.text}") if "Content Security" in m.text else None,
        )
        page.goto(f"{journey.url}/?token={journey.token}")  # the banner's login link
        page.wait_for_url(journey.url + "/")

        # 1. The loss curve fills in while the workers train; the ETA shows; so does kubectl.
        page.goto(journey.url + JOB_PAGE)
        loss = page.locator('#progress-charts .progress-chart[data-metric="loss"]')
        expect(loss).to_be_visible(timeout=180_000)
        first = int(loss.get_attribute("data-points") or 0)
        print(f"journey: first curve point after {time.monotonic() - started:.0f} s", flush=True)
        # The controller's half first (status.progress.eta, written every 5 s), then the page's:
        # a failure then says which half did not show it.
        eventually(lambda: bool(_not_failed(up).get("progress", {}).get("eta")), timeout=60)
        columns = _kubectl(up, "get", "tfj", JOB).stdout.splitlines()
        assert columns[0].split() == [
            "NAME",
            "PHASE",
            "READY",
            "RESTARTS",
            "PROGRESS",
            "ETA",
            "AGE",
        ]
        row = columns[1].split()
        assert row[1] == "Running" and 0 <= int(row[4]) < 100, columns
        assert re.fullmatch(r"(\d+h)?(\d+m)?\d+s", row[5]), columns
        summary = page.locator("#job-progress")
        try:
            expect(summary).to_contain_text("ETA", timeout=LIVE)
        except AssertionError as e:
            raise AssertionError(
                f"{e}\nstatus.progress now: {_status(up).get('progress')}"
            ) from None
        expect(loss).not_to_have_attribute("data-points", str(first), timeout=LIVE)
        more = int(loss.get_attribute("data-points") or 0)
        assert more > first, (first, more)

        # 2. A worker is killed mid-training: the failed run is listed with its exit code,
        # its log opens from the dashboard, and kubectl shows the same log.
        assert _not_failed(up).get("progress", {}).get("percent", 0) < 100
        _kill(up, f"{JOB}-worker-1")
        print(f"journey: worker-1 killed after {time.monotonic() - started:.0f} s", flush=True)
        failed = page.locator('#attempts tr[data-replica="worker-1"][data-attempt="0"]')
        expect(failed.locator(".exit-code")).to_have_text("137", timeout=LIVE)
        link = failed.locator('a:has-text("previous run")')
        expect(link).to_be_visible()
        shown = page.request.get(journey.url + (link.get_attribute("href") or ""))
        assert shown.status == 200, shown.text()
        assert "worker 1: num_replicas_in_sync 2" in shown.text()
        previous = _kubectl(up, "logs", f"{JOB}-worker-1", "--previous").stdout
        assert "worker 1: num_replicas_in_sync 2" in previous
        assert shown.text() == previous

        # 3. It trains on to the end.
        eventually(lambda: _not_failed(up).get("phase") == "Succeeded", timeout=600, interval=2)
        print(f"journey: Succeeded after {time.monotonic() - started:.0f} s", flush=True)
        expect(page.locator("#job-phase")).to_have_attribute(
            "data-phase", "Succeeded", timeout=LIVE
        )
        expect(summary).to_have_attribute("data-percent", "100", timeout=LIVE)
        # The loss fell by three orders of magnitude: drawn on a log axis, not as one spike.
        expect(loss).to_have_attribute("data-scale", "log")
        assert loss.evaluate("div => div.layout.yaxis.type") == "log"
        # The killed run's log stays readable on its row once the pod has ended for good.
        expect(failed.locator('a:has-text("previous run")')).to_be_visible(timeout=LIVE)
        again = page.request.get(journey.url + (link.get_attribute("href") or ""))
        assert again.text() == previous
        status = _status(up)
        assert status["progress"]["step"] == status["progress"]["totalSteps"] == EPOCHS * 20
        for i in range(2):
            assert "training done" in _kubectl(up, "logs", f"{JOB}-worker-{i}").stdout
        # The front page's jobs table shows the progress too.
        page.goto(journey.url + "/")
        listed = page.locator(f'tr[data-job="default/{JOB}"] .job-progress')
        expect(listed).to_have_attribute("data-percent", "100", timeout=LIVE)
        page.goto(journey.url + JOB_PAGE)
        # One restart count everywhere: the pod, the job's status and the dashboard.
        (task,) = status["tasks"]
        restarts = {r["name"]: r["restartCount"] for r in task["replicas"]}
        assert restarts[f"{JOB}-worker-1"] >= 1
        for name, count in restarts.items():
            pod = json.loads(_kubectl(up, "get", "pod", name, "-o", "json").stdout)
            assert pod["status"]["containerStatuses"][0]["restartCount"] == count, name
            cell = page.locator(f'#replicas tr:has(td.replica-pod:text-is("{name}")) .restarts')
            expect(cell).to_have_text(str(count))
        assert status["backoffCount"] == sum(restarts.values())

        # 4. Deleted by hand once finished: Git remembers it finished and leaves it deleted.
        def recorded() -> bool:
            entries = journey.repository().get("status", {}).get("finishedJobs") or []
            return any(e.get("name") == JOB for e in entries)

        eventually(recorded, timeout=60, interval=1)
        _kubectl(up, "delete", "tfj", JOB)
        page.goto(f"{journey.url}/repositories/default/origin")
        row_ = page.locator(f'tr[data-resource="TensorFlowTrainingJob/default/{JOB}"]')
        expect(row_.locator(".message")).to_contain_text(
            "finished (Succeeded) and deleted", timeout=LIVE
        )
        for i in range(2):
            sha = journey.remote.commit(f"unrelated {i}", {f"jobs/note{i}.txt": f"{i}\n"})
            journey.push_hook(sha)
            eventually(
                lambda sha=sha: journey.repository()["status"]["sync"]["revision"] == sha,
                timeout=60,
                interval=1,
            )
            gone = _kubectl(up, "get", "tfj", JOB, check=False)
            assert gone.returncode != 0 and "NotFound" in gone.stderr, gone.stdout
        print(f"journey: done after {time.monotonic() - started:.0f} s", flush=True)
        assert not [line for line in up.output if "Traceback" in line], "".join(up.output)
        context.close()
        browser.close()
    assert not problems, problems
