// Package api is seenapi's REST API: fiber handlers over the hot set,
// request validation and limits, problem+json errors, API keys, figures for
// /v1/stats and /metrics, the OpenAPI document and the dashboard.
//
// # Contract
//
// openapi.yaml (embedded, served at /openapi.yaml) describes every route;
// tests hold the server to it in both directions and validate requests and
// answers against it. The one call:
//
//	POST /v1/namespaces/{ns}/users/{user}/filter
//	{"candidates": ["i:981", "i:17"], "record": "returned", "limit": 20, "on_error": "fail"}
//	-> 200 {"unseen": ["i:17"], "seen_count": 1, "recorded": 1}
//
// # Requests
//
// Limits (Config) are checked before any work, in this order: the
// client address's requests refused for their key (keyGuesses: 429 past
// them, whatever the key but one admitted from there since), role, the
// caller's rate (Config.RateLimit or the key's own Key.Rate, a token
// bucket per key or, on an open server, per client address: 429
// rate-limited), query parameters (strict: one the route does not take,
// per queryParams, is rejected), namespace name and existence, user id,
// the body's Content-Type (JSON in UTF-8 only, else 415), body size, JSON shape
// (strict: unknown fields, and members given as null, are rejected), then
// each field; only then is a call's Idempotency-Key looked up, so that a
// bad request gets its own problem whatever key it carries. A rejected
// request never reaches the hot set, so it never changes stored state. Errors are mapped to
// problem types in one place (problemFor in errors.go).
//
// Strings decoded from a request (user ids, items) alias the request's
// buffer, which fiber reuses once the handler returns: handlers never keep
// them, and the hot set clones what it keeps.
//
// # Auth
//
// Keys carry a role, read < write < admin, each implying the ones below.
// Presented keys are hashed with SHA-256 and compared in constant time with
// every configured key. With no keys the API is open. GET /v1/auth tells a
// client (the dashboard) the role of the key it sends, admin on an open
// server.
//
// # Dashboard
//
// The dashboard's page and files (package web) are served at / with a
// Content-Security-Policy that allows only the service's own origin (and
// data: images): no inline script or style attribute, no eval, no framing.
// Every answer, refusals made before any route included, carries one set
// of headers, set in one place (notRendered, and RawAnswerHeaders for the
// answers written without fiber): X-Content-Type-Options: nosniff,
// X-Frame-Options: DENY, Referrer-Policy: no-referrer and, but for the
// dashboard's page and files, Content-Security-Policy: default-src 'none';
// frame-ancestors 'none' (nothing of it loads or runs, nor is it framed,
// should a browser render it); those of the routes that take a key,
// Cache-Control: no-store, their refusals before the route runs (405,
// 413) included (errorHandler, by keyedPath).
//
// # Concurrency
//
// A Server is safe for concurrent use: fiber serves each request on its own
// goroutine; the API's own state is atomic counters. Shutdown stops
// accepting, waits for in-flight requests, and leaves closing the hot set and
// the store to the caller.
package api
