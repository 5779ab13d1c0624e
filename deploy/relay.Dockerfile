# Builds aromba-relay for the self-hosted stack (docker-compose.yml).
# The build needs no database: sqlx reads the committed .sqlx/ query data.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
ENV SQLX_OFFLINE=true
RUN cargo build --release --locked -p aromba-relay \
    && install -D -m 0755 target/release/aromba-relay /out/aromba-relay

# No shell, no package manager, a non-root user (65532): the binary and
# the C runtime it links.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/aromba-relay /usr/local/bin/aromba-relay
USER nonroot:nonroot
EXPOSE 8080 9090
# Listen on every interface inside the container; the compose file decides
# what is published.
ENV AROMBA_RELAY_LISTEN=0.0.0.0:8080 \
    AROMBA_RELAY_METRICS_LISTEN=0.0.0.0:9090
HEALTHCHECK --interval=10s --timeout=5s --retries=6 \
    CMD ["/usr/local/bin/aromba-relay", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/aromba-relay"]
