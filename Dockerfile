# Multi-stage: build the wheel (with the compiled scorer) where the compiler lives, then a slim
# runtime with no build tools, running as a non-root user. Debian bookworm (Python 3.11), as the
# image that image/build.sh builds without Docker; tests/webhook/test_image.py keeps the two alike.
FROM python:3.11-slim-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY scorer/ scorer/
COPY webhook/ webhook/
RUN pip wheel --no-cache-dir --wheel-dir /wheels . \
 && python -c "import zipfile,glob,sys; w=glob.glob('/wheels/tasgate-*.whl')[0]; \
names=zipfile.ZipFile(w).namelist(); sys.exit(0 if any(n.startswith('scorer/_core') and n.endswith('.so') for n in names) else 'no compiled scorer in the wheel')"

FROM python:3.11-slim-bookworm
RUN groupadd --gid 65532 tasgate && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin tasgate
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels tasgate \
 && rm -rf /wheels \
 && python -c "import scorer; assert scorer.IMPLEMENTATION == 'compiled'"
USER 65532:65532
# 8443: the webhook (HTTPS, /mutate /validate /healthz /readyz); 9090: /metrics (plain HTTP).
EXPOSE 8443 9090
ENTRYPOINT ["tasgate"]
CMD ["serve", "--in-cluster", "--host=0.0.0.0", "--metrics-port=9090", "--on-timeout=deny"]
