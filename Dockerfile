# Two images. The last stage (built by default) is the service: web, worker and beat (docker-compose.yml).
# The `runtime` stage is the task runtime's image (docs/runtime.md), used by Kubernetes pools' init
# container (OSMO_RUNTIME_IMAGE):  docker build --target runtime -t osmo-runtime .
# It holds /opt/osmo-runtime: a Python interpreter, the runtime package and its storage libraries, the
# service's CLI and its libraries, an `osmo-runtime` launcher needing only /bin/sh, copied into each
# task's pod and run there, and `cli/osmo`, the task's `osmo` command. RUNTIME_PACKAGES is what the
# runtime and the CLI import (tests/runtime/test_launchers.py checks it against their imports).
FROM python:3.11-slim AS runtime
ARG RUNTIME_PACKAGES="fsspec s3fs aiobotocore aiohttp aiohappyeyeballs aiosignal aioitertools attrs botocore \
    frozenlist idna jmespath multidict propcache python-dateutil six urllib3 typing_extensions wrapt yarl \
    httpx httpcore h11 anyio certifi typer click rich shellingham annotated-doc pydantic pydantic_core \
    annotated-types typing-inspection markdown-it-py mdurl Pygments PyYAML websocket-client"
COPY requirements.txt /tmp/requirements.txt
RUN for name in $RUNTIME_PACKAGES; do grep -E "^$name==" /tmp/requirements.txt || exit 1; done \
        > /tmp/runtime-requirements.txt \
    && pip install --no-cache-dir --no-deps --target /opt/osmo-runtime/lib -r /tmp/runtime-requirements.txt \
    && cp -a /usr/local/. /opt/osmo-runtime/python/
COPY runtime/launchers/osmo-runtime /opt/osmo-runtime/osmo-runtime
COPY runtime/launchers/osmo /opt/osmo-runtime/cli/osmo
COPY runtime /opt/osmo-runtime/app/runtime
COPY cli /opt/osmo-runtime/app/cli
COPY parsing /opt/osmo-runtime/app/parsing

# The service's image (web, worker, beat). Not used by `make run` / `make test`.
# Runtime dependencies only (requirements.txt); test and benchmark tools stay out of it.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    STATIC_ROOT=/app/staticfiles
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt && pip check
COPY . .
# Static files are collected (hashed and compressed for WhiteNoise) into the image, outside the /data
# volume. The secret and the credential key here only let the production settings load; it is not kept in the image.
RUN pip install --no-cache-dir --no-deps -e . \
    && DJANGO_SETTINGS_MODULE=osmo.settings.production DJANGO_SECRET_KEY=collectstatic-only-at-build-time-never-used-to-sign \
       OSMO_CREDENTIALS_KEYS=Y29sbGVjdHN0YXRpYy1vbmx5LW5vdC1hLXJlYWwta2U= \
       OSMO_DATA_DIR=/tmp/build python manage.py collectstatic --no-input -v0 \
    && rm -rf /tmp/build \
    && useradd --system --uid 10001 --home-dir /app osmo \
    && mkdir -p /data && chown osmo /data
USER osmo
ENV OSMO_DATA_DIR=/data DJANGO_SETTINGS_MODULE=osmo.settings.production
EXPOSE 8000
CMD ["gunicorn", "-c", "python:osmo.gunicorn_conf", "osmo.wsgi"]
