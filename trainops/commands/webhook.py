"""`trainops webhook`: serve the admission webhook over HTTPS.

With `--manage-certs`, the process also keeps its own certificates: it stores a CA and a serving
pair in a Secret, writes them into `--cert-dir`, renews them before expiry and patches the CA
bundle into the webhook configurations (see certs/manager.py).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from trainops.commands.up_args import port_number
from webhook.configurations import CONFIGURATION_NAME, TRAINING_JOB_CRDS

DEFAULT_SECRET_NAME = "trainops-webhook-certs"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "webhook",
        help="serve the admission webhook (mutate + validate) over HTTPS",
        description="Serve /mutate, /validate, /healthz, /readyz and /metrics over HTTPS.",
    )
    parser.add_argument(
        "--cert-dir",
        type=Path,
        required=True,
        help="directory holding tls.crt and tls.key (watched; changes are picked up live)",
    )
    parser.add_argument(
        "--host", default="0.0.0.0", help="address to listen on (default: %(default)s)"
    )
    parser.add_argument(
        "--port",
        type=port_number(allow_zero=True),
        default=8443,
        help="port to listen on (default: %(default)s)",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=None,
        help="largest request body accepted; larger gets 413 (default 3 MiB + 256 KiB envelope)",
    )
    limits = parser.add_argument_group(
        "connection limits (docs/WEBHOOK.md: a connection over a cap takes the slot of one "
        "not being served)"
    )
    limits.add_argument(
        "--max-connections",
        type=int,
        default=100,
        help="open connections at most (default %(default)s)",
    )
    limits.add_argument(
        "--max-connections-per-source",
        type=int,
        default=50,
        help="open connections from one peer address at most (default %(default)s)",
    )
    limits.add_argument(
        "--max-handshakes",
        type=int,
        default=128,
        help="TLS handshakes in progress at most; a new connection over it takes the place of "
        "the oldest (default %(default)s)",
    )
    limits.add_argument(
        "--max-handshakes-per-source",
        type=int,
        default=32,
        help="TLS handshakes in progress from one peer address at most (default %(default)s)",
    )
    limits.add_argument(
        "--handshake-timeout",
        type=float,
        default=5.0,
        help="seconds to finish the TLS handshake (default %(default)g)",
    )
    limits.add_argument(
        "--header-timeout",
        type=float,
        default=5.0,
        help="seconds to send a complete request head, from connecting or from the first "
        "byte after a response (default %(default)g)",
    )
    limits.add_argument(
        "--idle-timeout",
        type=float,
        default=120.0,
        help="seconds a keep-alive connection may wait for its next request (default "
        "%(default)g: longer than the API server's 90 s, so it closes idle ones first)",
    )
    limits.add_argument(
        "--body-timeout",
        type=float,
        default=5.0,
        help="seconds to send a request body after its head; 408 after (default %(default)g)",
    )
    parser.add_argument(
        "--large-concurrency",
        type=int,
        default=None,
        help="large reviews (over 256 KiB) read and checked at once; others wait (default 2)",
    )
    parser.add_argument(
        "--shutdown-delay",
        type=float,
        default=5.0,
        help="seconds to keep serving (unready) after SIGTERM before closing (default 5)",
    )
    parser.add_argument(
        "--check-schema",
        action="store_true",
        help="in /validate, also check unknown fields and JSON types against the CRD schema "
        "(the API server has done so already when the trainops CRDs are installed)",
    )
    parser.add_argument(
        "--pod-security",
        action="store_true",
        help="refuse a job whose pod templates break the Pod Security level its namespace "
        "enforces (label pod-security.kubernetes.io/enforce); watches namespaces with "
        "--kubeconfig or in-cluster credentials",
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    managed = parser.add_argument_group("certificate self-management (in cluster)")
    managed.add_argument(
        "--manage-certs",
        action="store_true",
        help="create, store, renew and inject the webhook's certificates",
    )
    managed.add_argument("--service", help="the webhook's Service name (for the DNS SANs)")
    managed.add_argument("--namespace", help="the webhook's namespace")
    managed.add_argument(
        "--secret-name", default=DEFAULT_SECRET_NAME, help="Secret keeping the CA and pair"
    )
    managed.add_argument(
        "--webhook-config-name",
        action="append",
        dest="webhook_configs",
        help=f"Mutating/ValidatingWebhookConfiguration to patch (default {CONFIGURATION_NAME})",
    )
    managed.add_argument(
        "--crd",
        action="append",
        dest="crds",
        help="CRD whose conversion webhook gets the CA bundle (default: the two job CRDs)",
    )
    managed.add_argument(
        "--kubeconfig",
        help="kubeconfig for --manage-certs and --pod-security outside a cluster (default: "
        "in-cluster credentials)",
    )
    managed.add_argument(
        "--resync-seconds",
        type=float,
        default=60.0,
        help="how often to re-check the Secret and the injected bundles",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from kube.connlimits import ConnectionLimits
    from webhook.app import Settings
    from webhook.server import Companion, ServerConfig
    from webhook.server import run as run_server

    defaults = Settings()
    try:
        limits = ConnectionLimits(
            max_connections=args.max_connections,
            max_per_source=args.max_connections_per_source,
            max_handshakes=args.max_handshakes,
            max_handshakes_per_source=args.max_handshakes_per_source,
            handshake_timeout=args.handshake_timeout,
            header_timeout=args.header_timeout,
            idle_timeout=args.idle_timeout,
        )
        if not args.body_timeout > 0:
            raise ValueError("timeouts must be positive numbers of seconds")
    except ValueError as exc:
        print(f"trainops webhook: {exc}", file=sys.stderr)
        return 2
    levels = None
    if args.pod_security:
        from webhook.namespaces import NamespaceLevels

        levels = NamespaceLevels(args.kubeconfig)

    config = ServerConfig(
        cert_dir=args.cert_dir,
        host=args.host,
        port=args.port,
        settings=Settings(
            max_body_bytes=args.max_body_bytes or defaults.max_body_bytes,
            large_concurrency=max(1, args.large_concurrency or defaults.large_concurrency),
            body_timeout=args.body_timeout,
            check_schema=args.check_schema,
            level_of=levels,
        ),
        shutdown_delay=args.shutdown_delay,
        limits=limits,
    )
    companion: Companion | None = None
    if args.manage_certs:
        if not args.service or not args.namespace:
            print(
                "trainops webhook: --manage-certs needs --service and --namespace", file=sys.stderr
            )
            return 2
        from certs.manager import CertManager, ManagerConfig

        companion = CertManager(
            ManagerConfig(
                namespace=args.namespace,
                service=args.service,
                secret_name=args.secret_name,
                cert_dir=args.cert_dir,
                webhook_configs=tuple(args.webhook_configs or (CONFIGURATION_NAME,)),
                crds=tuple(args.crds or TRAINING_JOB_CRDS),
                resync_seconds=args.resync_seconds,
                kubeconfig=args.kubeconfig,
            )
        )
    else:
        missing = [p for p in (config.cert_file, config.key_file) if not p.is_file()]
        if missing:
            print(
                f"trainops webhook: {', '.join(map(str, missing))} not found; create them with "
                f"`trainops certs generate --out {args.cert_dir}` or use --manage-certs",
                file=sys.stderr,
            )
            return 2
    if levels is not None:
        from webhook.namespaces import Companions

        companion = Companions([companion, levels] if companion is not None else [levels])
    try:
        return run_server(config, companion=companion)
    except (OSError, ValueError) as exc:
        print(f"trainops webhook: {exc}", file=sys.stderr)
        return 1
