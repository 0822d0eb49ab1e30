# syntax=docker/dockerfile:1
# uncaged-workflow: the connector CLI, for machines that run it in a
# container (a CI box, a GPU host). Unlike the gateway it keeps a shell and
# git: workflows start child processes (agent CLIs, scripts). Build from the
# repository root:
#
#   docker build -f deploy/docker/workflow.Dockerfile -t uncaged-workflow .
#   docker run -e UNCAGED_WORKFLOW_TOKEN=... -v uncaged:/data uncaged-workflow \
#     connect --name ci-box --gateway https://gw.example.com

ARG GO_IMAGE=golang:1.26-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath \
      -ldflags "-s -w -X github.com/uncaged/workflow/shared/version.Version=${VERSION}" \
      -o /out/uncaged-workflow ./connector/cmd/uncaged-workflow

FROM ${RUNTIME_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git tini \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 10001 --user-group --home-dir /data --create-home --shell /usr/sbin/nologin uncaged
COPY --from=build /out/uncaged-workflow /usr/local/bin/uncaged-workflow
USER 10001:10001
# The storage root (registry, bundles, threads, CAS) lives in a volume.
ENV UNCAGED_WORKFLOW_STORAGE_ROOT=/data/store
VOLUME ["/data"]
WORKDIR /data
# tini reaps the agents' child processes and forwards SIGTERM, so connect
# can stop its threads cleanly.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/uncaged-workflow"]
CMD ["status"]
