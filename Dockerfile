# fourfold on the Locust image: the wheel built from this checkout (not editable), CPU-only torch,
# the stock locustfiles at /opt/fourfold/locustfiles. docs/distributed.md says what was and was not
# run of this file (tests/packaging/test_dockerfile.py checks it against the checkout, and
# tests/packaging/test_wheel.py runs its ENTRYPOINT + CMD from a wheel install).
#
#   docker build -t fourfold-locust .
#   docker run --rm fourfold-locust                                  # 10 s of L1 on the embedded simulator
#   docker run --rm -p 8089:8089 -p 5557:5557 fourfold-locust --master --host http://gpu-box:8000
#   docker run --rm fourfold-locust --worker --master-host master-box
#   docker run --rm fourfold-locust -f /opt/fourfold/locustfiles/l3_rag.py --headless -t 30s

# --- build: the wheel, with its C extension compiled for the image's own Python -----------------
FROM locustio/locust:2.47.0 AS build
USER root
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY fourfold ./fourfold
RUN python -m pip wheel --no-deps . -w /wheels

# --- run ----------------------------------------------------------------------------------------
FROM locustio/locust:2.47.0
USER root
COPY constraints-cpu.txt /tmp/constraints-cpu.txt
COPY --from=build /wheels /wheels
# torch from the CPU index first (constraints-cpu.txt pins it), so fourfold's dependencies never
# resolve the multi-GB CUDA build; then the wheel, its dependencies held to the same pin
RUN python -m pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu -r /tmp/constraints-cpu.txt \
    && python -m pip install --no-cache-dir -c /tmp/constraints-cpu.txt /wheels/fourfold-*.whl \
    && rm -rf /wheels \
    && mkdir -p /opt/fourfold \
    && ln -s "$(dirname "$(fourfold locustfile l1)")" /opt/fourfold/locustfiles
USER locust
WORKDIR /home/locust
ENV LOCUST_LOCUSTFILE=/opt/fourfold/locustfiles/l1_throughput.py PYTHONUNBUFFERED=1
EXPOSE 8089 5557
ENTRYPOINT ["locust"]
CMD ["--headless", "-u", "4", "-r", "4", "-t", "10s"]
