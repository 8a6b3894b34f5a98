// Package testidp holds an OpenID provider per test: discovery and a JWKS,
// signed with go-jose.
//
// It is an OpenID provider for tests, on 127.0.0.1: its
// discovery document and its JWKS, served and signed with go-jose (an
// implementation of its own, not the golang-jwt Flashline verifies with).
// Keys are added and withdrawn while it runs, and it can go down (every
// connection to it dropped).
package testidp
