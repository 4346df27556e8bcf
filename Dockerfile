# One image for the broker and the operator: `flotilla broker ...` or `flotilla operator ...`.
# Build: docker build -t flotilla:0.1.0 .   or, without Docker: buildah bud -t flotilla:0.1.0 .
# (see docs/operator.md). Pin the base by digest for reproducible builds:
#   --build-arg DEBIAN_IMAGE=docker.io/library/debian:bookworm-slim@sha256:...
# The test suite builds this file with buildah on a local Debian base (flotilla/testenv/dockerfile_image.py)
# and runs the result on its real node (tests/e2e/test_operator_pods.py).
ARG DEBIAN_IMAGE=docker.io/library/debian:bookworm-slim

FROM ${DEBIAN_IMAGE} AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/*
# The uid/gid the operator's StatefulSet runs brokers as (runAsUser/fsGroup 10001).
RUN groupadd --system --gid 10001 flotilla \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin flotilla \
 && mkdir -p /var/lib/flotilla/data /etc/flotilla \
 && chown 10001:10001 /var/lib/flotilla/data

FROM runtime AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
# The dependencies first, in a layer of their own that only pyproject.toml changes invalidate: a
# source change rebuilds just the project's install below. Every dependency ships wheels for
# linux/amd64 and arm64: no compiler needed.
COPY pyproject.toml ./
RUN python3 -m venv /opt/flotilla \
 && python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' >/tmp/requirements.txt \
 && /opt/flotilla/bin/pip install -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt
COPY README.md ./
COPY flotilla ./flotilla
COPY broker ./broker
COPY operator ./operator
RUN /opt/flotilla/bin/pip install --no-deps .

FROM runtime
LABEL org.opencontainers.image.title="flotilla" \
      org.opencontainers.image.description="Kafka-protocol broker (asyncio) and its Kubernetes operator" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/flotilla/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
COPY --from=build /opt/flotilla /opt/flotilla
USER 10001:10001
WORKDIR /var/lib/flotilla
# 9092 Kafka, 9404 broker metrics, 9405 operator metrics, 8080 operator liveness
EXPOSE 9092 9404 9405 8080
ENTRYPOINT ["flotilla"]
CMD ["broker", "--override", "listeners=PLAINTEXT://0.0.0.0:9092", "--override", "log.dirs=/var/lib/flotilla/data"]
