# Image for web, worker and beat (docker-compose.yml). Not used by `make run` / `make test`.
# Runtime dependencies only (requirements.txt); test and benchmark tools stay out of it.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    STATIC_ROOT=/app/staticfiles
WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt && pip check
COPY . .
# Static files are collected (hashed and compressed for WhiteNoise) into the image, outside the /data
# volume. The secret here only lets the production settings load; it is not kept in the image.
RUN pip install --no-cache-dir --no-deps -e . \
    && DJANGO_SETTINGS_MODULE=osmo.settings.production DJANGO_SECRET_KEY=collectstatic-only \
       OSMO_DATA_DIR=/tmp/build python manage.py collectstatic --no-input -v0 \
    && rm -rf /tmp/build \
    && useradd --system --uid 10001 --home-dir /app osmo \
    && mkdir -p /data && chown osmo /data
USER osmo
ENV OSMO_DATA_DIR=/data DJANGO_SETTINGS_MODULE=osmo.settings.production
EXPOSE 8000
CMD ["gunicorn", "-c", "python:osmo.gunicorn_conf", "osmo.wsgi"]
