// Package auth holds customer tokens and the admin token, the browser's
// session.
//
// It verifies the two kinds of caller the HTTP contract knows:
// customers, with a JWT, and the admin, with a shared token. A customer's
// JWT is signed with a secret Flashline shares (HS256), or by the store's
// identity provider (RS256, ES256, EdDSA) with a key it publishes as a JWKS
// (keys.go). It wraps github.com/golang-jwt/jwt/v5.
package auth
