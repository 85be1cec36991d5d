# One image for the web server (gunicorn) and, later, the Celery worker and beat.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

COPY requirements.txt .
RUN pip install -r requirements.txt

COPY . .
# collectstatic needs settings but no database or real secret.
RUN SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput \
    && mkdir -p var/tokens \
    && useradd --system --uid 1000 --home-dir /app sharewise \
    && chown -R sharewise /app/var

USER sharewise
EXPOSE 8000

# gthread workers keep HTTP connections alive; tune WEB_CONCURRENCY (processes) to the cores.
CMD ["sh", "-c", "gunicorn config.wsgi --bind 0.0.0.0:8000 --worker-class gthread --workers ${WEB_CONCURRENCY:-2} --threads ${WEB_THREADS:-4} --keep-alive 5 --access-logfile -"]
