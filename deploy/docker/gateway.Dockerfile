# syntax=docker/dockerfile:1
# uncaged-gateway: a static binary on a distroless base, running as an
# unprivileged user. Build from the repository root:
#
#   docker build -f deploy/docker/gateway.Dockerfile -t uncaged-gateway .
#
# Run it with UNCAGED_GATEWAY_KEY set (or --key-file on a mounted secret);
# it listens on :8080 and expects a TLS-terminating proxy in front
# (deploy/caddy, deploy/nginx). Its SQLite store is in
# /var/lib/uncaged-gateway: mount a volume there (docker-compose.yml does),
# or set UNCAGED_GATEWAY_DATABASE_URL to use PostgreSQL instead.

ARG GO_IMAGE=golang:1.26-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${GO_IMAGE} AS build
WORKDIR /src
# Modules first: this layer stays cached until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# CGO off: a static binary that needs no libc in the runtime image.
RUN CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath \
      -ldflags "-s -w -X github.com/uncaged/workflow/shared/version.Version=${VERSION}" \
      -o /out/uncaged-gateway ./gateway/cmd/uncaged-gateway
# The data directory, owned by the user the gateway runs as: the runtime
# image has no shell to create it, and an empty named volume mounted on it
# starts with its owner, so the gateway can write there. (COPY --chown
# below owns the directory it creates; this owner is for builders that
# keep the source's.)
RUN install -d -o 65532 -g 65532 /out/data

FROM ${RUNTIME_IMAGE}
COPY --from=build /out/uncaged-gateway /usr/local/bin/uncaged-gateway
COPY --from=build --chown=65532:65532 /out/data /var/lib/uncaged-gateway
# 65532 is distroless's "nonroot"; numeric so Kubernetes' runAsNonRoot can
# check it.
USER 65532:65532
ENV UNCAGED_GATEWAY_LISTEN=:8080
# Not the default (~/.uncaged/gateway): the directory made above, the one to
# mount a volume on. Without a volume the store would go with the container
# (or fail to open, on a read-only root filesystem).
ENV UNCAGED_GATEWAY_DATA_DIR=/var/lib/uncaged-gateway
EXPOSE 8080
# The binary checks itself: there is no shell or curl in this image.
HEALTHCHECK --interval=30s --timeout=5s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/uncaged-gateway", "status", "--health"]
ENTRYPOINT ["/usr/local/bin/uncaged-gateway"]
CMD ["serve"]
