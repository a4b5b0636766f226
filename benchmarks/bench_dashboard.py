"""Benchmark of the dashboard in a real browser (run by hand; results go to docs/PERFORMANCE.md,
section Dashboard). Issue #11 item 4.

    .venv/bin/python benchmarks/bench_dashboard.py [--repos 20] [--jobs-per-repo 10] [--runs 15]

Set-up, all real: `trainops up` runs as its own process on a temporary data dir; the script
makes `--repos` bare Git repositories (git CLI), each holding `--jobs-per-repo`
TrainingJob manifests, and creates one JobRepository per Git repository through the API server
(spread over four namespaces, automated sync), so the front page lists 20 repositories and the
200 jobs they deployed. Of each repository's jobs, four TensorFlowTrainingJobs run a one-line
python command to Succeeded (real pod processes); the others — TensorFlow and XGBoost — are
paused, so the machine is not measuring 200 × replicas processes starting. The script waits until
every repository is Synced and every job has a phase before measuring.

1. **First paint of the front page**: `--runs` times, a fresh browser context (empty cache, so
   the static assets are fetched too) opens `/`; from the page's own timings:
   `first-contentful-paint` (`performance.getEntriesByType('paint')`), the HTML response
   (`responseEnd - requestStart` of the navigation entry) and DOMContentLoaded. The first run
   (a cold chromium) is reported apart from the median and max of the others. Plus the HTML's
   size and its server time measured from this process (GET /, urllib).
2. **Change → page**: with the front page open, the script creates a (paused) job through the
   API server, then deletes it, `--changes` times each; a MutationObserver in the page stamps
   the moment the job's row appears (disappears) with `performance.timeOrigin +
   performance.now()`, compared with this process's `time.time()` when the write was answered
   (the API server had committed it) — the same wall clock (the skew between the two is bounded
   by an evaluate round trip, printed). An init script wraps the page's EventSource to stamp
   when the first stream event about the job arrived, splitting API → browser from browser →
   DOM; and the page's fragment fetches are counted and timed (Resource Timing). Reported
   p50 / p90 / max.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.machine import cpu_model  # noqa: E402
from tests.dashboard.conftest import (  # noqa: E402
    api_token,
    api_url,
    launch_chromium,
    short_job,
)

_TOKEN: list[str] = []
"""The API's token (every request needs one): set once `up` runs."""


def _signed_in(browser: Any, url: str) -> Any:
    """A browser context at 1280×800 with the login cookie."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.add_cookies([{"name": "trainops-token", "value": _TOKEN[0], "url": url}])
    return context


def _authorize_urllib(token: str) -> None:
    """Every `urllib.request.urlopen` of this process sends the API's token."""
    opener = urllib.request.build_opener()
    opener.addheaders = [("Authorization", f"Bearer {token}")]
    urllib.request.install_opener(opener)


from tests.gitops.conftest import Remote  # noqa: E402
from tests.up.conftest import Up, eventually, finish  # noqa: E402

NAMESPACES = ("default", "vision", "speech", "ranking")
GROUP, VERSION = "batch.tensorstack.dev", "v1beta1"

PAUSED = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: {kind}
metadata:
  name: {name}
spec:
  runMode:
    pause:
      enabled: true
  replicaSpecs:
    - type: {first}
      template:
        spec:
          containers:
            - name: {main}
              image: busybox
              command: ["sh", "-c", "sleep 3600"]
    - type: worker
      replicas: 2
      template:
        spec:
          containers:
            - name: {main}
              image: busybox
              command: ["sh", "-c", "sleep 3600"]
"""

# Resolves with the wall-clock time (ms) at which `selector` starts (or stops) matching.
WATCH = """([key, selector, present]) => {
  window.__seen = window.__seen || {};
  const now = () => performance.timeOrigin + performance.now();
  const done = () => (document.querySelector(selector) !== null) === present;
  if (done()) { window.__seen[key] = -1; return; }
  const observer = new MutationObserver(() => {
    if (done()) { window.__seen[key] = now(); observer.disconnect(); }
  });
  observer.observe(document.body, {subtree: true, childList: true, attributes: true,
                                   characterData: true});
}"""


# Wraps the page's own EventSource (an init script, before the dashboard's script runs): when
# (wall clock, ms) the first change about each object since the last reset reached the browser,
# so change → page splits into API → browser and browser → DOM. It only stamps the time.
LISTEN = """(() => {
  window.__events = {};
  const stamp = (event) => {
    const change = JSON.parse(event.data);
    const meta = (change.object || {}).metadata || {};
    const key = meta.namespace + "/" + meta.name;
    if (!(key in window.__events)) window.__events[key] = performance.timeOrigin + performance.now();
  };
  const Original = window.EventSource;
  function Stamped(url, options) {
    const source = new Original(url, options);
    source.addEventListener("job", stamp);
    source.addEventListener("repository", stamp);
    return source;
  }
  Stamped.prototype = Original.prototype;
  Object.assign(Stamped, {CONNECTING: 0, OPEN: 1, CLOSED: 2});
  window.EventSource = Stamped;
})();"""


def _manifest(repo: int, index: int) -> tuple[str, str]:
    name = f"r{repo:02d}-job-{index}"
    if index < 4:
        return name, short_job(name, "step 100 loss 0.1")
    if index % 2:
        return name, PAUSED.format(
            name=name, kind="XGBoostTrainingJob", first="master", main="xgboost"
        )
    return name, PAUSED.format(
        name=name, kind="TensorFlowTrainingJob", first="chief", main="tensorflow"
    )


def _custom(up: Up) -> Any:
    from kubernetes import client, config

    return client.CustomObjectsApi(config.new_client_from_config(config_file=str(up.kubeconfig)))


def _core(up: Up) -> Any:
    from kubernetes import client, config

    return client.CoreV1Api(config.new_client_from_config(config_file=str(up.kubeconfig)))


def seed(up: Up, root: Path, repos: int, per_repo: int) -> None:
    from kubernetes import client

    core = _core(up)
    for ns in NAMESPACES[1:]:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    custom = _custom(up)
    for r in range(repos):
        remote = Remote(root / f"git-{r:02d}")
        files = dict(_manifest(r, j) for j in range(per_repo))
        remote.commit(
            f"Team {r:02d}: {per_repo} training jobs",
            {f"jobs/{name}.yaml": text for name, text in files.items()},
        )
        namespace = NAMESPACES[r % len(NAMESPACES)]
        body = {
            "apiVersion": "gitops.trainops.dev/v1alpha1",
            "kind": "JobRepository",
            "metadata": {"name": f"team-{r:02d}", "namespace": namespace},
            "spec": {
                "repoURL": remote.url,
                "path": "jobs",
                "interval": "30s",
                "syncPolicy": {"automated": {"prune": True, "selfHeal": True}},
            },
        }
        custom.create_namespaced_custom_object(
            "gitops.trainops.dev", "v1alpha1", namespace, "jobrepositories", body
        )


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.load(r)


def wait_settled(url: str, repos: int, jobs: int) -> None:
    def synced() -> bool:
        items = _get(url + "/api/v1/repositories")["items"]
        ok = [i for i in items if (i.get("status") or {}).get("sync", {}).get("status") == "Synced"]
        print(f"  {len(ok)}/{repos} repositories Synced", end="\r", flush=True)
        return len(ok) >= repos

    eventually(synced, timeout=600, interval=1)

    def phased() -> bool:
        items = _get(url + "/api/v1/jobs")["items"]
        done = [i for i in items if i.get("phase") in ("Succeeded", "Paused")]
        print(f"  {len(done)}/{jobs} jobs Succeeded or Paused   ", end="\r", flush=True)
        return len(done) >= jobs

    eventually(phased, timeout=600, interval=1)
    print()


def first_paint(browser: Any, url: str, runs: int) -> list[dict[str, float]]:
    results = []
    for _ in range(runs):
        context = _signed_in(browser, url)
        page = context.new_page()
        page.goto(url + "/", wait_until="load")
        page.wait_for_function("() => performance.getEntriesByType('paint').length >= 2")
        timing = page.evaluate(
            """() => {
              const nav = performance.getEntriesByType('navigation')[0];
              const fcp = performance.getEntriesByName('first-contentful-paint')[0];
              return {fcp: fcp.startTime, html: nav.responseEnd - nav.requestStart,
                      ttfb: nav.responseStart - nav.requestStart,
                      dcl: nav.domContentLoadedEventEnd, bytes: nav.transferSize,
                      rows: document.querySelectorAll('table#jobs tr[data-job]').length,
                      repos: document.querySelectorAll('table#repositories tr[data-repo]').length};
            }"""
        )
        results.append(timing)
        context.close()
    return results


def server_render(url: str, runs: int) -> tuple[list[float], int]:
    times, size = [], 0
    for _ in range(runs):
        started = time.perf_counter()
        with urllib.request.urlopen(url + "/", timeout=30) as r:
            size = len(r.read())
        times.append((time.perf_counter() - started) * 1000)
    return times, size


def _arrived(page: Any, key: str) -> float:
    page.wait_for_function(f"() => window.__events[{json.dumps(key)}] !== undefined")
    arrived: float = page.evaluate(f"window.__events[{json.dumps(key)}]")
    return arrived


def change_latency(browser: Any, up: Up, url: str, changes: int) -> dict[str, list[float]]:
    custom = _custom(up)
    context = _signed_in(browser, url)
    context.add_init_script(LISTEN)
    page = context.new_page()
    page.goto(url + "/", wait_until="load")
    page.wait_for_selector('#stream-status[data-state="open"]')
    skews = []
    for _ in range(5):
        before = time.time() * 1000
        seen = page.evaluate("performance.timeOrigin + performance.now()")
        after = time.time() * 1000
        skews.append((seen - before, after - seen))
    print(f"  clock check: page time − script time within {max(max(s) for s in skews):.1f} ms")
    out: dict[str, list[float]] = {
        "create": [],
        "delete": [],
        "create_send": [],
        "create_stream": [],
        "delete_stream": [],
    }
    for i in range(changes):
        name = f"bench-change-{i}"
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "TensorFlowTrainingJob",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "runMode": {"pause": {"enabled": True}},
                "replicaSpecs": [
                    {
                        "type": "chief",
                        "template": {
                            "spec": {"containers": [{"name": "tensorflow", "image": "busybox"}]}
                        },
                    }
                ],
            },
        }
        selector = f'tr[data-job="default/{name}"]'
        page.evaluate(WATCH, [f"add-{i}", selector, True])
        page.evaluate("window.__events = {}")
        sent = time.time() * 1000
        custom.create_namespaced_custom_object(
            GROUP, VERSION, "default", "tensorflowtrainingjobs", body
        )
        answered = time.time() * 1000
        page.wait_for_function(f"() => window.__seen['add-{i}'] !== undefined", timeout=30_000)
        shown = page.evaluate(f"window.__seen['add-{i}']")
        out["create"].append(shown - answered)
        out["create_send"].append(shown - sent)
        out["create_stream"].append(_arrived(page, f"default/{name}") - answered)
        page.evaluate(WATCH, [f"del-{i}", selector, False])
        page.evaluate("window.__events = {}")
        custom.delete_namespaced_custom_object(
            GROUP, VERSION, "default", "tensorflowtrainingjobs", name
        )
        answered = time.time() * 1000
        page.wait_for_function(f"() => window.__seen['del-{i}'] !== undefined", timeout=30_000)
        out["delete"].append(page.evaluate(f"window.__seen['del-{i}']") - answered)
        out["delete_stream"].append(_arrived(page, f"default/{name}") - answered)
    fetches = page.evaluate(
        """() => performance.getEntriesByType('resource')
                 .filter(e => e.name.includes('fragment='))
                 .map(e => e.responseEnd - e.startTime)"""
    )
    out["fragment_fetch"] = fetches
    context.close()
    return out


def _summary(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return (
        f"p50 {statistics.median(ordered):7.1f}  p90 {p90:7.1f}  max {ordered[-1]:7.1f}  "
        f"min {ordered[0]:7.1f} ms (n={len(ordered)})"
    )


def measure(browser: Any, up: Up, url: str, args: argparse.Namespace, total: int) -> None:
    print(f"chromium {browser.version}")
    paints = first_paint(browser, url, args.runs)
    first, rest = paints[0], paints[1:] or paints
    print(f"front page: {first['rows']} job rows, {first['repos']} repositories")
    if (first["rows"], first["repos"]) != (total, args.repos):
        raise SystemExit(f"the front page should list {total} jobs and {args.repos} repositories")
    print(f"  cold first run: FCP {first['fcp']:.0f} ms, HTML {first['html']:.0f} ms")
    labels = {
        "fcp": "first-contentful-paint",
        "html": "HTML response",
        "ttfb": "time to first byte",
        "dcl": "DOMContentLoaded",
    }
    for key, label in labels.items():
        print(f"  {label:24} {_summary([r[key] for r in rest])}")
    server, size = server_render(url, args.runs)
    print(f"  GET / from the script   {_summary(server)}, {size / 1024:.0f} KiB")
    print(f"load {os.getloadavg()}")
    latency = change_latency(browser, up, url, args.changes)
    print("change → page (from the API's answer to the DOM change):")
    print(f"  job created → row shown   {_summary(latency['create'])}")
    print(f"  job deleted → row gone    {_summary(latency['delete'])}")
    print(f"  (create, from the send)   {_summary(latency['create_send'])}")
    print(f"  created → its first event in the page  {_summary(latency['create_stream'])}")
    print(f"  deleted → its first event in the page  {_summary(latency['delete_stream'])}")
    fetches = latency["fragment_fetch"]
    print(f"  fragment fetches: {len(fetches)} for {2 * args.changes} changes, {_summary(fetches)}")
    print(f"load {os.getloadavg()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repos", type=int, default=20)
    parser.add_argument("--jobs-per-repo", type=int, default=10)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--changes", type=int, default=20)
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs, load {os.getloadavg()}")
    git = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    print(f"python {sys.version.split()[0]}, {git}")
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp:
        root = Path(tmp)
        up = Up(root / "data")
        up.start(timeout=60)
        try:
            url = api_url(up)
            _TOKEN.append(api_token(up))
            _authorize_urllib(_TOKEN[0])
            started = time.monotonic()
            seed(up, root, args.repos, args.jobs_per_repo)
            total = args.repos * args.jobs_per_repo
            wait_settled(url, args.repos, total)
            took = time.monotonic() - started
            print(f"seeded {args.repos} repositories, {total} jobs in {took:.0f} s")
            with sync_playwright() as playwright:
                browser = launch_chromium(playwright)
                try:
                    measure(browser, up, url, args, total)
                finally:
                    browser.close()
        finally:
            finish(up)


if __name__ == "__main__":
    main()
