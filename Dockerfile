# The elasticdl runtime image: Python, TensorFlow and elasticdl, nothing else.
#
#   docker build -t elasticdl/elasticdl:0.3.0 .
#   docker build --build-arg BASE_IMAGE=python:3.12-slim --build-arg REVISION=$(git rev-parse HEAD) .
#   docker build --build-arg ELASTICDL_EXTRAS=[gpu] -t elasticdl/elasticdl:0.3.0-gpu .
#
# TensorFlow is the `tensorflow` distribution: it trains on CPU, and on GPU in an image built
# with ELASTICDL_EXTRAS=[gpu] (the CUDA libraries of `tensorflow[and-cuda]`).
#
# It has no ENTRYPOINT: Argo steps run `python -m elasticdl.steps.<name> ARGS...`, and a
# model zoo's image (`elasticdl zoo init DIR`) starts FROM this one, adds the zoo at /model_zoo
# and installs the zoo's requirements constrained to the versions pinned here
# (/opt/elasticdl/constraints.txt), so a zoo cannot silently replace TensorFlow or protobuf.
# Pin BASE_IMAGE by digest (python:3.11-slim@sha256:...) for reproducible builds.

ARG BASE_IMAGE=python:3.11-slim

# Stage 1: install the project into a virtual environment; sources stay in this stage.
FROM ${BASE_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
# Only what the wheel is built from (.dockerignore lists the same set).
COPY pyproject.toml README.md ./
COPY elasticdl ./elasticdl
COPY runtime ./runtime
COPY steps ./steps
COPY workflows ./workflows
COPY proto ./proto
COPY model_zoo ./model_zoo
COPY elasticdl_preprocessing ./elasticdl_preprocessing
ARG ELASTICDL_EXTRAS=
# tf_keras (Keras 2 model files) without its `tensorflow` requirement: the image's TensorFlow
# provides it.
RUN python -m pip install ".${ELASTICDL_EXTRAS}" \
    && python -m pip install --no-deps "tf_keras==2.21.*" \
    && mkdir -p /opt/elasticdl \
    && python -m pip freeze --exclude elasticdl-argo > /opt/elasticdl/constraints.txt

# Stage 2: the runtime, with the virtual environment and no build inputs.
FROM ${BASE_IMAGE}
ARG VERSION=0.3.0.dev0
ARG SOURCE=https://github.com/sql-machine-learning/elasticdl
ARG REVISION=unknown
LABEL org.opencontainers.image.title="elasticdl" \
      org.opencontainers.image.description="Elastic, fault-tolerant training and prediction for Keras models: the runtime that Argo steps and model-zoo images start from" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
# Numeric UID/GID: Kubernetes can only verify runAsNonRoot for a numeric USER.
RUN groupadd --system --gid 1000 elasticdl \
    && useradd --system --uid 1000 --gid 1000 --create-home --home-dir /home/elasticdl \
       --shell /usr/sbin/nologin elasticdl
COPY --from=build /opt/venv /opt/venv
COPY --from=build /opt/elasticdl /opt/elasticdl
# A pod given a GPU (`--worker_resource_request gpu=1`) gets the driver's CUDA libraries from
# the NVIDIA container runtime only for the capabilities named here (unset, older runtimes mount
# `utility` alone, without libcuda); which GPUs it sees stays the device plugin's decision.
ENV PATH=/opt/venv/bin:$PATH \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TF_CPP_MIN_LOG_LEVEL=3
USER 1000:1000
WORKDIR /home/elasticdl
