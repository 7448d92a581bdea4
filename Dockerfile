# One image for every process of hitl (web, worker, beat); docker-compose.yml picks the command.
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 LITELLM_LOCAL_MODEL_COST_MAP=True
WORKDIR /app
COPY requirements.txt .
RUN pip install -r requirements.txt
COPY . .
RUN DEBUG=1 python manage.py collectstatic --no-input -v 0
# var/sandboxes exists, owned by the app's user, before docker compose mounts its volume there (a
# volume mounted on a missing path is made root's, and the tools could not write).
RUN useradd --create-home hitl && mkdir -p /app/var/sandboxes && chown -R hitl /app/var
USER hitl
EXPOSE 8000
# No --proxy-headers by default: a container run on its own must not trust a client's X-Forwarded-For.
# Behind nginx (docker-compose.yml) the web services add it.
CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "hitl.asgi:application"]
