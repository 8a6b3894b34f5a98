# The flashline binary in a small image. Used by docker-compose.yml, which
# asks for the demo itself: the image's default command is production's
# `serve`, which refuses to start without real secrets (docs/configuration.md).
# Never make it `serve --demo` (development secrets, printed to stdout);
# TestImageIsSafeToDeploy in deploy/ keeps it so.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /flashline ./cmd/flashline

FROM gcr.io/distroless/static-debian12
COPY --from=build /flashline /flashline
EXPOSE 8080
ENTRYPOINT ["/flashline"]
CMD ["serve"]
