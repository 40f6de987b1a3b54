# syntax=docker/dockerfile:1
# Multi-stage build of payguard's processes. Each runtime image is a
# target: worker, pgsim, starter, api. (Temporal is the release's own
# images in docker-compose.yml.)

FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/ ./worker ./pgsim ./starter ./api

FROM debian:12.12-slim AS runtime
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 payguard
USER payguard

FROM runtime AS worker
COPY --from=build /out/worker /usr/local/bin/worker
EXPOSE 8081
ENTRYPOINT ["worker"]

FROM runtime AS pgsim
COPY --from=build /out/pgsim /usr/local/bin/pgsim
EXPOSE 8090 8091
ENTRYPOINT ["pgsim"]

FROM runtime AS starter
COPY --from=build /out/starter /usr/local/bin/starter
ENTRYPOINT ["starter"]

FROM runtime AS api
COPY --from=build /out/api /usr/local/bin/api
EXPOSE 8080
ENTRYPOINT ["api"]
