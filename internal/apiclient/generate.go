package apiclient

//go:generate go tool -modfile=../../scripts/tools/go.mod oapi-codegen -config oapi-codegen.yaml ../../api/openapi.json
