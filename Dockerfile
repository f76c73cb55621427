# toolbound's service, MCP server and gateway in one image (docs/operations.md#containers).
#
#   docker build -t toolbound .
#   docker run -p 8780:8780 -v ./toolbound.toml:/etc/toolbound/toolbound.toml:ro toolbound
#
# It runs as an unprivileged user, answers its health check on /healthz, and stops
# gracefully on SIGTERM: toolbound is PID 1 (exec form), and its HTTP server stops
# accepting, lets the requests in flight finish, and closes the store.

FROM python:3.12-slim AS wheel
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY src ./src
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.12-slim
# The extras to install, and any other package the configuration needs (the upstream
# MCP servers the gateway starts, the packs of your tools).
ARG EXTRAS=service,postgres,mcp
ARG EXTRA_PACKAGES=""
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=wheel /wheels /wheels
RUN wheel="$(ls /wheels/toolbound-*.whl)" \
 && pip install --no-cache-dir "toolbound[${EXTRAS}] @ file://${wheel}" ${EXTRA_PACKAGES} \
 && rm -rf /wheels \
 && useradd --system --uid 10001 --home-dir /var/lib/toolbound --create-home toolbound
USER toolbound
WORKDIR /var/lib/toolbound
EXPOSE 8780
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8780/healthz', timeout=2)"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["toolbound"]
CMD ["serve", "--config", "/etc/toolbound/toolbound.toml", "--host", "0.0.0.0", "--port", "8780"]
