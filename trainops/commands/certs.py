"""`trainops certs`: make webhook certificates by hand, and inject a CA bundle once.

- `generate` writes a fresh CA and a serving certificate signed by it into a directory, for
  running the webhook outside a cluster or with certificates you distribute yourself.
- `inject` patches `caBundle` into the webhook configurations (and CRD conversion webhooks, if
  any) — what `trainops webhook --manage-certs` does continuously, done once. It uses the
  client runtime (`kube.Client`, every call bounded by its timeout) and the same pure functions
  as the manager (certs/inject.py).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webhook.configurations import CONFIGURATION_NAME, TRAINING_JOB_CRDS

if TYPE_CHECKING:
    from kube.client import Client
    from kube.resources import Resource

Update = Callable[[dict[str, Any], str], dict[str, Any] | None]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("certs", help="generate webhook certificates, inject CA bundles")
    sub = parser.add_subparsers(dest="certs_command", metavar="ACTION")
    parser.set_defaults(func=lambda args: _usage(parser))

    gen = sub.add_parser(
        "generate",
        help="write ca.crt, tls.crt and tls.key for the webhook",
        description="Write a new CA (ca.crt) and a serving pair (tls.crt, tls.key) signed by it. "
        "The serving certificate always names localhost and 127.0.0.1.",
    )
    gen.add_argument("--out", type=Path, required=True, help="directory to write into")
    gen.add_argument(
        "--san",
        action="append",
        default=[],
        metavar="NAME_OR_IP",
        help="extra DNS name or IP address (repeatable), e.g. trainops-webhook.trainops-system.svc",
    )
    gen.add_argument("--days", type=int, default=365, help="serving certificate validity (days)")
    gen.add_argument("--ca-days", type=int, default=3650, help="CA validity (days)")
    gen.add_argument(
        "--force",
        action="store_true",
        help="replace certificates already in --out (whatever trusts the old CA stops working)",
    )
    gen.set_defaults(func=_generate)

    inj = sub.add_parser(
        "inject",
        help="patch a CA bundle into the webhook configurations once",
        description="Set caBundle on every webhook of the named Mutating- and "
        "ValidatingWebhookConfigurations, and on CRD conversion webhooks if they use one.",
    )
    inj.add_argument("--ca-file", type=Path, required=True, help="PEM file with the CA(s)")
    inj.add_argument(
        "--kubeconfig",
        help="kubeconfig file (default: in a pod its service account, else $KUBECONFIG, "
        "~/.kube/config)",
    )
    inj.add_argument("--context", help="kubeconfig context to use")
    inj.add_argument(
        "--webhook-config-name",
        action="append",
        dest="webhook_configs",
        help=f"configuration name (repeatable; default {CONFIGURATION_NAME})",
    )
    inj.add_argument(
        "--crd", action="append", dest="crds", help="CRD name (repeatable; default: the job CRDs)"
    )
    inj.set_defaults(func=_inject)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _generate(args: argparse.Namespace) -> int:
    from certs import pki

    for flag, days in (("--days", args.days), ("--ca-days", args.ca_days)):
        if not 1 <= days <= pki.MAX_DAYS:
            print(
                f"trainops certs generate: {flag} {days}: must be between 1 and {pki.MAX_DAYS}",
                file=sys.stderr,
            )
            return 2
    try:
        names = ", ".join(str(e.value) for e in pki.san_entries(args.san))
    except ValueError as exc:
        print(f"trainops certs generate: --san {exc}", file=sys.stderr)
        return 2
    if args.out.exists() and not args.out.is_dir():
        print(f"trainops certs generate: --out {args.out} is not a directory", file=sys.stderr)
        return 2
    existing = [n for n in (pki.CA_FILE, pki.CERT_FILE, pki.KEY_FILE) if (args.out / n).exists()]
    if existing and not args.force:
        # A new CA silently replacing one that webhook configurations trust breaks them.
        print(
            f"trainops certs generate: {args.out} already holds {', '.join(existing)}; "
            "use --force to replace them (clients trusting the old CA will then fail)",
            file=sys.stderr,
        )
        return 2
    ca = pki.new_ca(days=args.ca_days)
    serving = pki.new_serving_cert(ca, args.san, days=args.days)
    try:
        pki.write_bundle(args.out, ca, serving)
    except OSError as exc:
        where = exc.filename or args.out
        print(f"trainops certs generate: cannot write {where}: {exc.strerror}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}/ca.crt, tls.crt, tls.key (serial {serving.serial:x}; SANs: {names})")
    return 0


def _inject(args: argparse.Namespace) -> int:
    from certs.inject import ca_bundle_b64

    try:
        bundle = ca_bundle_b64(args.ca_file.read_bytes())
    except OSError as exc:
        print(f"trainops certs inject: --ca-file {args.ca_file}: {exc.strerror}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"trainops certs inject: --ca-file {args.ca_file}: {exc}", file=sys.stderr)
        return 2
    if args.kubeconfig and not Path(args.kubeconfig).is_file():
        print(
            f"trainops certs inject: --kubeconfig {args.kubeconfig}: no such file",
            file=sys.stderr,
        )
        return 2
    return asyncio.run(_inject_all(args, bundle))


async def _inject_all(args: argparse.Namespace, bundle: str) -> int:
    from certs.inject import crd_with_ca_bundle, webhook_config_with_ca_bundle
    from kube import resources
    from kube.client import Client

    try:
        client = await Client.connect(args.kubeconfig, context=args.context)
    except Exception as exc:  # kube.config.ConfigError (names file and field), an OS error, ...
        print(f"trainops certs inject: cannot load kubeconfig: {exc}", file=sys.stderr)
        return 2
    targets: list[tuple[Resource, str, Update]] = []
    for name in args.webhook_configs or [CONFIGURATION_NAME]:
        targets.append(
            (resources.MUTATING_WEBHOOK_CONFIGURATIONS, name, webhook_config_with_ca_bundle)
        )
        targets.append(
            (resources.VALIDATING_WEBHOOK_CONFIGURATIONS, name, webhook_config_with_ca_bundle)
        )
    for name in args.crds or TRAINING_JOB_CRDS:
        targets.append((resources.CRDS, name, crd_with_ca_bundle))
    try:
        found = 0
        for resource, name, update in targets:
            outcome = await _inject_one(client, resource, name, update, bundle)
            if outcome is None:
                return 1
            if outcome and resource is not resources.CRDS:
                found += 1
    finally:
        await client.close()
    if not found:
        print("trainops certs inject: no webhook configuration found", file=sys.stderr)
        return 1
    return 0


async def _inject_one(
    client: Client, resource: Resource, name: str, update: Update, bundle: str
) -> bool | None:
    """Inject into one object, printing what happened: True when it exists, False when it
    does not, None after an error (printed to stderr)."""
    from kube.errors import APIError, Conflict, NotFound

    kind = resource.kind
    for _attempt in range(5):
        try:
            current = await client.get(resource, name)
        except NotFound:
            print(f"{kind} {name}: not found, skipped")
            return False
        except APIError as exc:
            print(f"trainops certs inject: {kind} {name}: {exc.message}", file=sys.stderr)
            return None
        updated = update(current, bundle)
        if updated is None:
            print(f"{kind} {name}: already up to date")
            return True
        try:
            await client.replace(resource, updated)
        except Conflict:
            continue  # changed since we read it: read again
        except APIError as exc:
            print(f"trainops certs inject: {kind} {name}: {exc.message}", file=sys.stderr)
            return None
        print(f"{kind} {name}: caBundle set")
        return True
    print(f"trainops certs inject: {kind} {name}: kept conflicting", file=sys.stderr)
    return None
