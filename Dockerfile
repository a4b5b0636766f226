# The trainops image: one command, every component (`trainops webhook`, `trainops controller`,
# `trainops check`, …). Debian's Python on debian:bookworm-slim; no compiler, no pip, no caches in
# the runtime stage (the build stage compiles the admission rules with mypyc: setup.py).
# hack/image builds it with no Docker engine or registry (docs/IMAGE.md); `docker build .`
# builds it anywhere else.

# -- build: a virtual environment in /opt/trainops, copied whole into the runtime stage ------------
FROM debian:bookworm-slim AS build
# gcc and the Python headers: mypyc compiles the admission rules into C extensions here.
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev gcc libc6-dev \
    && apt-get clean && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/trainops && python3 -m venv /opt/build-tools
WORKDIR /src
# The dependencies first, read from pyproject.toml, so a change to our code alone reuses this
# layer. Every dependency comes as a wheel (`--only-binary`): nothing but our rules is compiled
# here. The build tools (setuptools, mypy for mypyc) get a venv of their own, left in this stage.
# A build machine whose egress re-signs TLS passes its CA bundle as the `pip-cert` build secret
# (hack/image does): it is mounted for these two steps only and never stored in a layer.
# The versions are constraints.txt's, the ones CI tested (the README installs with it too).
COPY pyproject.toml constraints.txt ./
RUN --mount=type=secret,id=pip-cert \
    if [ -s /run/secrets/pip-cert ]; then export PIP_CERT=/run/secrets/pip-cert; fi \
    && /opt/trainops/bin/python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' >requirements.txt \
    && /opt/trainops/bin/pip install --no-cache-dir --disable-pip-version-check --only-binary=:all: \
        -c constraints.txt -r requirements.txt \
    && /opt/build-tools/bin/pip install --no-cache-dir --disable-pip-version-check --only-binary=:all: \
        -c constraints.txt setuptools mypy
COPY README.md setup.py trainops_progress.py ./
COPY trainops/ trainops/
COPY policies/ policies/
COPY webhook/ webhook/
COPY controller/ controller/
COPY gitops/ gitops/
COPY certs/ certs/
COPY kube/ kube/
COPY dashboard/ dashboard/
# Of the plotly package only plotly.min.js is kept (the dashboard serves it; its ~60 MB Python
# side is never imported: dashboard/plotlyfile.py finds the file without importing it).
# The image holds only what deploy/ runs: not the embedded cluster (localcluster/, the `local`
# extra with kubernetes-validate), which `trainops up` and `trainops apiserver` need — both say so
# when it is missing. pip and setuptools go too: nothing installs into the image at run time.
RUN --mount=type=secret,id=pip-cert \
    if [ -s /run/secrets/pip-cert ]; then export PIP_CERT=/run/secrets/pip-cert; fi \
    && TRAINOPS_MYPYC=1 /opt/build-tools/bin/pip wheel --no-cache-dir --disable-pip-version-check \
        --no-build-isolation --no-deps -w /tmp/wheel . \
    && /opt/trainops/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps /tmp/wheel/trainops-*.whl \
    && cd / && /opt/trainops/bin/python -c 'import policies.job as j, sys; sys.exit(0 if j.__file__.endswith(".so") else "rules not compiled: " + j.__file__)' \
    && /opt/trainops/bin/python -c 'import importlib.util as u, sys; sys.exit(any(u.find_spec(m) for m in ("localcluster", "kubernetes_validate")) and "the embedded cluster is in the image")' \
    && site=$(/opt/trainops/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))') \
    && find "$site/plotly" -mindepth 1 -maxdepth 1 ! -name __init__.py ! -name package_data -exec rm -rf {} + \
    && find "$site/plotly/package_data" -mindepth 1 ! -name plotly.min.js -exec rm -rf {} + \
    && cd / && /opt/trainops/bin/python -c 'import sys; from dashboard.plotlyfile import plotly_file as f; sys.exit(0 if f() else "plotly.min.js is missing")' \
    && /opt/trainops/bin/pip uninstall -y --disable-pip-version-check pip setuptools

# -- runtime -----------------------------------------------------------------------------------
FROM debian:bookworm-slim
# git (and CA certificates, for https remotes) for GitOps; Python itself from Debian, the same
# package the build stage's virtual environment was made with.
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 git ca-certificates \
    && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/debconf/*-old /var/log/apt /var/log/dpkg.log \
    && useradd --uid 65532 --user-group --no-create-home --home-dir /tmp \
        --shell /usr/sbin/nologin trainops
COPY --from=build /opt/trainops /opt/trainops
# The root filesystem is read-only in deploy/ (only /tmp is writable): no .pyc writes (the
# build compiled them), HOME on /tmp for git.
ENV PATH=/opt/trainops/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
# Numeric, so the kubelet can check runAsNonRoot against the image (deploy/ runs 65532 too).
USER 65532:65532
WORKDIR /tmp
# 8443: the webhook (HTTPS); 8080: the controller's /metrics, /healthz, /readyz.
EXPOSE 8443 8080
ENTRYPOINT ["trainops"]
CMD ["webhook", "--cert-dir", "/etc/trainops/certs"]
