# Builds aromba-relay for the self-hosted stack (docker-compose.yml).
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p aromba-relay

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 relay
COPY --from=build /src/target/release/aromba-relay /usr/local/bin/aromba-relay
USER relay
ENTRYPOINT ["/usr/local/bin/aromba-relay"]
