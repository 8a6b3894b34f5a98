// Package contract holds checks of HTTP exchanges against the OpenAPI
// document.
//
// It checks HTTP exchanges against the API's OpenAPI document
// (api/openapi.json) with kin-openapi's openapi3filter, so that the
// document cannot drift from the server: the tests send every request through
// Handler (in process) or Transport (to a serve process), and a request or
// answer the document does not describe fails the test.
//
// The rules, for one exchange:
//   - a path the document does not have must be answered 404 not_found, and a
//     method it does not list for a path 405 method_not_allowed;
//   - the answer must be one the operation documents: its status, its
//     headers, its body's schema (an error's code among the ones listed for
//     that status);
//   - a request the document refuses (a body that breaks its schema, a
//     missing required header or parameter, no credentials) must be answered
//     with an error (4xx): the server may be stricter than the document,
//     never laxer.
//
// Two leniencies mirror the server's: a request body without a Content-Type
// is read as JSON, and a body the server stopped reading (too large, too
// slow, refused before it was read) is not checked. Everything under
// /admin/riverui/ is River's and is checked as the operation of
// /admin/riverui/ (its statuses and security only).
package contract
