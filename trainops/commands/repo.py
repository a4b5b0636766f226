"""`trainops repo list|get|sync|refresh|diff`: JobRepositories through the GitOps HTTP API.

The server is `--server URL`, else `$TRAINOPS_SERVER`, else the address `trainops up` recorded
in its data directory (`DATA_DIR/api.json`, see `gitops.api.routes.read_address`), else — with
`--kubeconfig`, or when no `up` runs and a kubeconfig is found — the in-cluster install
(Service `trainops-system/trainops-gitops`) through the API server's service proxy
(`repo_target`). The token is `--token`, else `$TRAINOPS_TOKEN`, else the one in `api.json`
(only for the server named there) or the kubeconfig's: a token the cluster accepts (the API
asks it, TokenReview), whose user's rights decide what it may see and do (403 otherwise). `NAME` is `namespace/name` or `name` in `-n/--namespace` (default `default`).

Output is kubectl's: `list` prints a table (`NAMESPACE NAME SYNC HEALTH REVISION AGE REPO`;
every namespace unless `-n` is given), `get` a description (source, policy, sync and health, the
last sync, conditions, each resource at its FILE:LINE) or, with `-o json|yaml`, the objects
(`list` as a `kind: List`); `sync` and `refresh` say what was queued; `diff` prints each
resource's unified diff under a `# FILE:LINE KIND/NAME` header.

Exit codes: 0 done; 1 an error (the server unreachable, the repository not found, a refused
token or revision, …: one line on standard error). `diff` exits as `kubectl diff` does: 0 no
differences, 1 differences, 2 an error.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import Any

from gitops.engine.redact import printable
from trainops.commands.repo_output import age, describe, print_objects, table
from trainops.commands.repo_target import Choice, choose

__all__ = ["age", "register", "run", "table"]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_DIFF_ERROR = 2
_START_HINT = (
    "start it with `trainops up --repo GIT_URL`, or pass --server URL or --kubeconfig FILE"
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from trainops.commands.up_args import default_data_dir

    parser = subparsers.add_parser(
        "repo",
        help="list, inspect, sync, diff and delete JobRepositories (GitOps)",
        description="Talk to the GitOps HTTP API of `trainops up` (or of --server): list "
        "JobRepositories, show one, request a sync or a refresh, show what differs from Git, "
        "delete one.",
    )
    _common(parser, default_data_dir(), suppress=False)
    sub = parser.add_subparsers(dest="repo_command", metavar="COMMAND")

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text[0].upper() + help_text[1:])
        _common(p, default_data_dir(), suppress=True)
        p.set_defaults(func=run, repo_command=name)
        return p

    p = add("list", "list JobRepositories with their sync and health status")
    p.add_argument("-o", "--output", choices=("json", "yaml"), help="print the objects")
    _managed_fields_flag(p)
    p = add("get", "show one JobRepository")
    p.add_argument("name", metavar="NAME", help="NAME or NAMESPACE/NAME")
    p.add_argument("-o", "--output", choices=("json", "yaml"), help="print the whole object")
    _managed_fields_flag(p)
    p = add("sync", "sync a JobRepository now (queued; the reconciler does the work)")
    p.add_argument("name", metavar="NAME", help="NAME or NAMESPACE/NAME")
    p.add_argument(
        "--revision",
        metavar="REV",
        help="branch, tag or commit to sync to, once (default: its targetRevision)",
    )
    p = add("refresh", "compare a JobRepository with Git now (and sync it if automated)")
    p.add_argument("name", metavar="NAME", help="NAME or NAMESPACE/NAME")
    p = add("diff", "show how the live objects differ from Git (exit 1 when they do)")
    p.add_argument("name", metavar="NAME", help="NAME or NAMESPACE/NAME")
    p = add(
        "delete",
        "delete a JobRepository (e.g. one `trainops up --repo` made with a mistyped URL); the "
        "jobs it applied keep running",
    )
    p.add_argument("name", metavar="NAME", help="NAME or NAMESPACE/NAME")
    parser.set_defaults(func=_usage(parser))


def _managed_fields_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--show-managed-fields",
        action="store_true",
        help="keep metadata.managedFields in -o json/yaml (left out by default, as kubectl does)",
    )


def _common(parser: argparse.ArgumentParser, data_dir: Path, *, suppress: bool) -> None:
    """The connection options, on `repo` and on each subcommand (so they go either side);
    on a subcommand they default to SUPPRESS, so they do not overwrite `repo`'s."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument(
        "--server",
        metavar="URL",
        default=default(None),
        help="the API's URL (default: $TRAINOPS_SERVER, else the address `trainops up` recorded "
        "in DATA_DIR/api.json)",
    )
    parser.add_argument(
        "--token",
        metavar="TOKEN",
        default=default(None),
        help="a Kubernetes bearer token: every request needs one, and is allowed what the "
        "cluster's RBAC allows its user (default: $TRAINOPS_TOKEN, else api.json's)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        metavar="DIR",
        default=default(None),
        help=f"the data directory of `trainops up` (default: {data_dir})",
    )
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        metavar="FILE",
        default=default(None),
        help="reach the API installed in that cluster (Service trainops-system/trainops-gitops) "
        "through the API server's service proxy, with this kubeconfig's credentials and token "
        "(also used without it when no `trainops up` runs: $KUBECONFIG, in-cluster, "
        "~/.kube/config)",
    )
    parser.add_argument(
        "-n",
        "--namespace",
        metavar="NS",
        default=default(None),
        help="the namespace: of NAME for get, sync, refresh, diff and delete (default: default); "
        "for list, list only this namespace (default: every namespace)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        default=default(30.0),
        help="give up on the server after this long (default: 30)",
    )


def _usage(parser: argparse.ArgumentParser) -> Any:
    def show(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return 2

    return show


# --- running -------------------------------------------------------------------------------------


class Failure(Exception):
    """One line for standard error, and the exit code."""


class _NotFound(Failure):
    pass


def run(args: argparse.Namespace) -> int:
    import asyncio

    command = args.repo_command
    error_code = EXIT_DIFF_ERROR if command == "diff" else EXIT_ERROR
    try:
        choice = _choice(args)
        if choice.proxy:
            return asyncio.run(_run_proxied(args, choice))
        assert choice.server is not None
        return asyncio.run(_run(args, _normal(choice.server), choice.token))
    except Failure as e:
        print(printable(f"trainops repo: {e}"), file=sys.stderr)
        return error_code


def _choice(args: argparse.Namespace) -> Choice:
    from gitops.api.routes import read_address
    from trainops.commands.kubeconnect import default_kubeconfig, server_of
    from trainops.commands.up_args import default_data_dir

    data_dir = (args.data_dir or default_data_dir()).expanduser()
    try:
        address = read_address(data_dir)
    except (ValueError, OSError) as e:
        if args.server or os.environ.get("TRAINOPS_SERVER") or args.kubeconfig:
            address = None
        else:
            raise Failure(f"cannot read the API address: {e}") from None
    env_kubeconfig = os.environ.get("KUBECONFIG") or None
    first = default_kubeconfig()
    in_use = (
        args.kubeconfig.expanduser() if args.kubeconfig else (first if env_kubeconfig else None)
    )
    beside = None
    if in_use is not None:
        with contextlib.suppress(ValueError, OSError):
            found = read_address(in_use.parent)
            if found is not None:
                beside = (in_use.parent, found.url, found.token)
    home_config = Path.home() / ".kube" / "config"
    choice = choose(
        server=args.server or os.environ.get("TRAINOPS_SERVER") or None,
        token=args.token or os.environ.get("TRAINOPS_TOKEN") or None,
        kubeconfig=args.kubeconfig.expanduser() if args.kubeconfig else None,
        data_dir=data_dir,
        data_dir_given=args.data_dir is not None,
        local_url=address.url if address else None,
        local_token=address.token if address else None,
        env_kubeconfig=env_kubeconfig,
        env_server=server_of(first) if env_kubeconfig and first else None,
        local_server=server_of(data_dir / "kubeconfig") if address else None,
        default_kubeconfig_exists=home_config.exists(),
        in_cluster=bool(os.environ.get("KUBERNETES_SERVICE_HOST")),
        beside_kubeconfig=beside,
    )
    if isinstance(choice, str):
        raise Failure(f"{choice}: {_START_HINT}")
    return choice


def _normal(server: str) -> str:
    server = server.strip().rstrip("/")
    return server if "://" in server else "http://" + server


async def _run(args: argparse.Namespace, server: str, token: str | None) -> int:
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=args.timeout, connect=min(args.timeout, 10.0))
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    namespace, name = _name(args)
    try:
        async with aiohttp.ClientSession(timeout=timeout, headers=headers) as session:

            async def send(method: str, path: str, body: Any) -> tuple[int, str]:
                async with session.request(method, server + path, json=body) as response:
                    return response.status, await response.text(errors="replace")

            return await _command(args, _Client(send, server), namespace, name)
    except aiohttp.InvalidURL:
        raise Failure(f"invalid server URL {server!r}") from None
    except aiohttp.ClientConnectorError as e:
        errno = e.os_error.errno if e.os_error else None
        why = os.strerror(errno).lower() if errno else str(e)
        raise Failure(f"cannot reach the trainops API at {server} ({why}): {_START_HINT}") from None
    except TimeoutError:
        raise Failure(
            f"no answer from the trainops API at {server} within {args.timeout:g}s"
        ) from None
    except aiohttp.ClientError as e:
        raise Failure(f"talking to the trainops API at {server} failed: {e}") from None


async def _run_proxied(args: argparse.Namespace, choice: Choice) -> int:
    from trainops.commands.repo_proxy import proxied_send

    namespace, name = _name(args)
    async with proxied_send(choice, args.timeout) as (send, where):
        return await _command(args, _Client(send, where), namespace, name)


def _name(args: argparse.Namespace) -> tuple[str | None, str | None]:
    given = getattr(args, "name", None)
    if given is None:
        return args.namespace, None
    namespace, slash, name = given.rpartition("/")
    if not slash:
        return args.namespace or "default", given
    if not namespace or not name or "/" in namespace:
        raise Failure(f"invalid name {given!r}: use NAME or NAMESPACE/NAME")
    if args.namespace and args.namespace != namespace:
        raise Failure(f"{given} names namespace {namespace}, but -n says {args.namespace}")
    return namespace, name


async def _command(
    args: argparse.Namespace, client: _Client, namespace: str | None, name: str | None
) -> int:
    command = args.repo_command
    if command == "list":
        items = (await client.get("/repositories"))["items"]
        if namespace is not None:
            items = [i for i in items if _meta(i).get("namespace") == namespace]
        if args.output:
            print_objects(
                {"apiVersion": "v1", "kind": "List", "items": items},
                args.output,
                show_managed_fields=args.show_managed_fields,
            )
        elif not items:
            where = f" in namespace {namespace}" if namespace else ""
            print(f"No JobRepositories found{where}.", file=sys.stderr)
        else:
            sys.stdout.write(printable(table(items)))
        return EXIT_OK
    assert namespace is not None and name is not None
    path = f"/repositories/{namespace}/{name}"
    if command == "get":
        obj = await client.get(path, namespace=namespace, name=name)
        if args.output:
            print_objects(obj, args.output, show_managed_fields=args.show_managed_fields)
        else:
            sys.stdout.write(printable(describe(obj)))
        return EXIT_OK
    if command == "sync":
        body = {"revision": args.revision} if args.revision else {}
        await client.post(path + "/sync", body, namespace=namespace, name=name)
        suffix = f" (revision {args.revision})" if args.revision else ""
        print(f"sync of {namespace}/{name} requested{suffix}")
        return EXIT_OK
    if command == "refresh":
        await client.post(path + "/refresh", {}, namespace=namespace, name=name)
        print(f"refresh of {namespace}/{name} requested")
        return EXIT_OK
    if command == "delete":
        await client.delete(path, namespace=namespace, name=name)
        print(f"jobrepository {namespace}/{name} deleted")
        return EXIT_OK
    if command == "diff":
        answer = await client.get(path + "/diff", namespace=namespace, name=name)
        if answer.get("comparisonError"):
            raise Failure(
                f"{namespace}/{name} cannot be compared with Git: {answer['comparisonError']}"
            )
        items = answer["items"]
        for item in items:
            header = (
                f"# {item.get('file')}:{item.get('line')} {item.get('kind')}/{item.get('name')}"
            )
            print(printable(header))
            text = str(item.get("text") or "")
            sys.stdout.write(printable(text if text.endswith("\n") or not text else text + "\n"))
        return 1 if items else EXIT_OK
    raise Failure(f"unknown command {command!r}")


class _Client:
    """The API's routes over `send(method, path, body) -> (status, text)`."""

    def __init__(self, send: Any, server: str) -> None:
        self.send = send
        self.server = server

    async def get(self, path: str, **target: str) -> Any:
        status, text = await self.send("GET", "/api/v1" + path, None)
        return self._answer(status, text, target)

    async def delete(self, path: str, **target: str) -> Any:
        status, text = await self.send("DELETE", "/api/v1" + path, None)
        return self._answer(status, text, target)

    async def post(self, path: str, body: dict[str, Any], **target: str) -> Any:
        status, text = await self.send("POST", "/api/v1" + path, body)
        return self._answer(status, text, target)

    def _answer(self, status: int, text: str, target: dict[str, str]) -> Any:
        import json

        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if status < 300 and doc is not None:
            return doc
        message = doc.get("error") if isinstance(doc, dict) else None
        if not isinstance(message, str) or not message:
            message = " ".join(text.split())[:200] or "no details"
        if status == 404 and target:
            raise _NotFound(f"jobrepository {target['namespace']}/{target['name']} not found")
        if status == 401:
            raise Failure(
                f"the trainops API at {self.server} refused the request ({message}): pass "
                "--token or set $TRAINOPS_TOKEN"
            )
        if status < 300:
            raise Failure(f"the trainops API at {self.server} answered something not JSON")
        raise Failure(f"the trainops API at {self.server} answered {status}: {message}")


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}
