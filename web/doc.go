// Package web holds the dashboard's static files, embedded into the binary
// and served at / by the API: static/index.html, static/style.css,
// static/app.js (plain ES modules, no build step, no external assets),
// static/boot.js (a classic script that explains a page whose module could
// not start) and static/api.js, the operation table generated from
// openapi.yaml by `go generate ./web` (a test fails when it is stale).
//
// The dashboard shows the service's figures (GET /v1/stats every 2 s, with
// sparklines of calls/s and hit ratio computed from successive answers;
// the calls leave out GET /v1/stats, every open dashboard's own polling,
// which the table of routes still counts),
// the namespaces, and one user's filter, and it checks, records and erases
// items, and downloads a user's export, with the API key kept in the
// browser's sessionStorage; more items than the service takes in one call
// (GET /v1/auth's max_candidates), or items whose request body would be
// over its max_body_bytes, are refused before they are sent (both asked
// again after a 413 too-many-candidates or body-too-large: the service's
// limit was lowered), and so is a user id longer than max_user_bytes. A call not
// answered within 10 s is given up and said so (a stalled service would
// otherwise leave its last figures standing as current). It asks
// GET /v1/auth for the key's role at load and whenever a key is entered or
// forgotten, shows it (without a key, it asks GET /healthz instead, whose
// key_required says whether the service needs one; on a service with keys it
// then calls none of the API's routes until one is entered: each call would
// be one more 401 in the service's errors; refused by a proxy that does not
// pass it, a 4xx, GET /v1/auth's 401 says so instead; unanswered, a 5xx or
// nothing, as when the service was down as the page loaded, it is asked again
// before each such call, and none is sent until it answers), and disables what the role cannot do (record needs
// write, erase admin), saying beside it the role it needs; beside what the
// role can do, nothing. A 401 or 403 from any later call still shows its
// detail, with what key to enter, and updates the role (a 403's detail
// names the key's role), for keys changed on the service since the check.
// The banner says a problem as a problem's box does: its title ("Key not
// used"), its detail and what to do. A user page whose address
// names a namespace the key may not call (GET /v1/auth's namespaces) says
// so, and leaves it out of the select instead of calling it; the users it
// lists then, or on the inspector's page before the namespaces are listed,
// are those of a namespace the key may call.
//
// The outcome of an action, and what a look-up of a user found, is read out
// to a screen reader through one status region that stays in the page
// (#announce), since a user's page is drawn anew after a change; a problem
// is an alert, drawn once while it lasts. An error of what was typed in a
// field (items refused, by the page or the service; no key, or one the page
// cannot send; no user id to look up, or one too long; a user id in the
// page's address too long, or "." or "..", which no path can carry) is said
// in the page and tied to that field (aria-invalid, aria-describedby) until
// it is changed, one message a field (a new one replaces its earlier one):
// never in the browser's own bubble (its check of a required
// field, or setCustomValidity), which a screen reader back in the field
// does not hear as what is wrong with it.
//
// A user's page is outlined h2 User inspector > h3 the user > h4 each of its
// panels > h5 a part of a panel, every view one h1 first and no level
// skipped; every view keeps to a 320 px window.
//
// The page calls the API beside itself (its paths resolved against the
// page's own directory, not the server's root), so that it works behind a
// reverse proxy serving the service under a path prefix.
//
// The API serves these files under a Content-Security-Policy allowing only
// the service's own origin (and data: images): the page has no inline script,
// no style attribute (widths go through CSSOM), no eval.
//
// The tests (go test ./web) build cmd/seenapi (or take $SEENAPI_BIN), run it
// on a loopback port and drive /usr/bin/chromium (or $SEENAPI_CHROMIUM)
// headless through chromedp; without chromium they skip, unless CI=true.
// Every API exchange the page makes is validated against openapi.yaml; an
// uncaught exception or a Content-Security-Policy violation fails the test,
// and so does a step in a tab (opening it, a page load, a wait) that the
// browser has not finished within a minute, saying so, where a stalled
// browser would otherwise hold the run until go test's timeout.
// Screenshots of failed pages go to $SEENAPI_ARTIFACTS (or a
// seenapi-web-artifacts-* directory under the system's temp dir), one for
// each tab of the failed test, named after it (from its second tab on,
// with the tab's number after: Test-tab2.png).
//
// FS is safe for concurrent use: the embedded tree is read-only.
package web
