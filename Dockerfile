# syntax=docker/dockerfile:1
# The sparkwatch collector image (what helm/sparkwatch deploys by default):
#   docker build -t ghcr.io/sparkwatch/sparkwatch:0.1.0 .
# Stage 1 builds wheels for sparkwatch and its [collector] extra (FastAPI, uvicorn, APScheduler,
# psycopg) and [otlp] extra (so that --otlp / config.otlp works in the chart); stage 2 installs
# only those wheels on a slim base and runs as a non-root user.

ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY sparkwatch ./sparkwatch
COPY listener ./listener
COPY collector ./collector
COPY dashboards ./dashboards
COPY migrations ./migrations
RUN pip wheel --wheel-dir /wheels '.[collector,otlp]'

FROM python:${PYTHON_VERSION}-slim
ARG UID=10001
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN groupadd --system --gid ${UID} sparkwatch \
 && useradd --system --uid ${UID} --gid ${UID} --home-dir /var/lib/sparkwatch \
      --shell /usr/sbin/nologin sparkwatch \
 && mkdir -p /var/lib/sparkwatch/spool /var/lib/sparkwatch/history \
 && chown -R ${UID}:${UID} /var/lib/sparkwatch
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links /wheels 'sparkwatch[collector,otlp]'
USER ${UID}:${UID}
WORKDIR /var/lib/sparkwatch
EXPOSE 9751
ENTRYPOINT ["sparkwatch"]
CMD ["collector", "--spool-dir", "/var/lib/sparkwatch/spool"]
