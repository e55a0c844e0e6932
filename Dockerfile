# Two images. The last stage (built by default) is the service: web, worker and beat (docker-compose.yml).
# The `runtime` stage is the task runtime's image (docs/runtime.md), used by Kubernetes pools' init
# container (OSMO_RUNTIME_IMAGE):  docker build --target runtime -t osmo-runtime .
# It holds /opt/osmo-runtime: a Python interpreter, the runtime package and its storage libraries, and an
# `osmo-runtime` launcher needing only /bin/sh, copied into each task's pod and run there.
FROM python:3.11-slim AS runtime
COPY requirements.txt /tmp/requirements.txt
RUN grep -E '^(fsspec|s3fs|aiobotocore|aiohttp|aiohappyeyeballs|aiosignal|aioitertools|attrs|botocore|frozenlist|idna|jmespath|multidict|propcache|python-dateutil|six|urllib3|typing_extensions|wrapt|yarl)==' \
        /tmp/requirements.txt > /tmp/runtime-requirements.txt \
    && pip install --no-cache-dir --no-deps --target /opt/osmo-runtime/lib -r /tmp/runtime-requirements.txt \
    && cp -a /usr/local/. /opt/osmo-runtime/python/ \
    && printf '%s\n' '#!/bin/sh' 'here=$(dirname "$0")' \
       'export PYTHONHOME="$here/python" PYTHONPATH="$here/lib:$here/app" PYTHONUNBUFFERED=1' \
       'export LD_LIBRARY_PATH="$here/python/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"' \
       'exec "$here/python/bin/python3" -m runtime "$@"' > /opt/osmo-runtime/osmo-runtime \
    && chmod 755 /opt/osmo-runtime/osmo-runtime
COPY runtime /opt/osmo-runtime/app/runtime

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
