# Kairos container image: one binary, every process (`kairos api`,
# `dispatcher`, `worker`, `callback-relay`, `migrate`, `dev`).
#
#   docker build -t kairos:latest .
#
# Build stage: the locked dependency set (Cargo.lock, --locked), dependencies
# compiled in their own layer so a source change rebuilds only Kairos.
FROM rust:1.94-slim-bookworm AS build
# C toolchain for the bundled SQLite and the TLS library (aws-lc).
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc g++ make cmake pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
ENV CARGO_TERM_COLOR=never CARGO_INCREMENTAL=0
COPY Cargo.toml Cargo.lock ./
# Every workspace member's manifest (tests/dockerfile.rs checks this list and
# the placeholder loop below against Cargo.toml's `members`): a missing one
# fails the workspace load, and with it the dependency layer.
COPY core/Cargo.toml core/
COPY adapters/sql/Cargo.toml adapters/sql/
COPY adapters/rabbitmq/Cargo.toml adapters/rabbitmq/
COPY adapters/redis/Cargo.toml adapters/redis/
COPY adapters/inproc/Cargo.toml adapters/inproc/
COPY api/Cargo.toml api/
COPY dispatcher/Cargo.toml dispatcher/
COPY worker/Cargo.toml worker/
COPY callback-relay/Cargo.toml callback-relay/
COPY net-guard/Cargo.toml net-guard/
COPY testkit/Cargo.toml testkit/
COPY client/Cargo.toml client/
COPY ui/Cargo.toml ui/
# Placeholder sources so `cargo fetch` and the dependency build see every
# workspace member; replaced by the real sources below. No `|| true`: a
# failure here is a broken cache layer, and must fail the build.
RUN for d in core adapters/sql adapters/rabbitmq adapters/redis adapters/inproc api \
             dispatcher worker callback-relay net-guard testkit client ui; do \
      mkdir -p "$d/src" && echo "" > "$d/src/lib.rs"; \
    done \
 && mkdir -p src benches && echo "fn main() {}" > src/main.rs && echo "fn main() {}" > benches/latency.rs \
 && cargo fetch --locked \
 && cargo build --release --locked --bin kairos
COPY . .
# Make cargo see the real sources as newer than the placeholders.
RUN find core adapters api dispatcher worker callback-relay net-guard testkit client ui src \
      -name '*.rs' -exec touch {} + \
 && cargo build --release --locked --bin kairos \
 && strip target/release/kairos

# Runtime stage: Debian slim with CA certificates (callbacks over HTTPS) and
# curl (compose health checks); runs as an unprivileged user.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/kairos --create-home kairos
COPY --from=build /src/target/release/kairos /usr/local/bin/kairos
USER kairos
WORKDIR /var/lib/kairos
ENV KAIROS_HTTP_ADDR=0.0.0.0:8080 KAIROS_METRICS_ADDR=0.0.0.0:9090
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/kairos"]
CMD ["dev"]
