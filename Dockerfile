# The trainops image: one binary, every component (`trainops webhook`, `trainops controller`,
# `trainops check`, …).
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY trainops/ trainops/
COPY policies/ policies/
COPY webhook/ webhook/
COPY controller/ controller/
COPY gitops/ gitops/
COPY certs/ certs/
COPY localcluster/ localcluster/
COPY kube/ kube/
COPY dashboard/ dashboard/
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin trainops
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER 65532:65532
# 8443: the webhook (HTTPS); 8080: the controller's /metrics, /healthz, /readyz.
EXPOSE 8443 8080
ENTRYPOINT ["trainops"]
CMD ["webhook", "--cert-dir", "/etc/trainops/certs"]
