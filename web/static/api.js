// Code generated from openapi.yaml by web/internal/cmd/jsclient. DO NOT EDIT.
// Change openapi.yaml, then run `go generate ./web`; a test fails while this file is stale.
// Contract: seenapi 1.0.0.

/**
 * @typedef {Object} Operation
 * @property {string} method HTTP method.
 * @property {string} path Path template; {name} is a path parameter, percent-encoded when filled.
 * @property {string[]} params Path parameters in path order.
 * @property {("none"|"read"|"write"|"admin")} role The least key role the operation needs.
 * @property {string|null} body Request media type, null without a body.
 */

/** Every operation of the contract, by operationId. @type {Readonly<Record<string, Operation>>} */
export const operations = Object.freeze({
  checkSeen: Object.freeze({ method: "POST", path: "/v1/namespaces/{ns}/users/{user}/check", params: ["ns", "user"], role: "read", body: "application/json" }),
  exportUser: Object.freeze({ method: "GET", path: "/v1/namespaces/{ns}/users/{user}/export", params: ["ns", "user"], role: "admin", body: null }),
  filterBatch: Object.freeze({ method: "POST", path: "/v1/namespaces/{ns}/filter", params: ["ns"], role: "write", body: "application/json" }),
  filterUser: Object.freeze({ method: "POST", path: "/v1/namespaces/{ns}/users/{user}/filter", params: ["ns", "user"], role: "write", body: "application/json" }),
  forgetItems: Object.freeze({ method: "DELETE", path: "/v1/namespaces/{ns}/users/{user}/items", params: ["ns", "user"], role: "write", body: "application/json" }),
  forgetUser: Object.freeze({ method: "DELETE", path: "/v1/namespaces/{ns}/users/{user}", params: ["ns", "user"], role: "admin", body: null }),
  getAuth: Object.freeze({ method: "GET", path: "/v1/auth", params: [], role: "read", body: null }),
  getBackup: Object.freeze({ method: "GET", path: "/v1/backup", params: [], role: "admin", body: null }),
  getDashboard: Object.freeze({ method: "GET", path: "/", params: [], role: "none", body: null }),
  getHealth: Object.freeze({ method: "GET", path: "/healthz", params: [], role: "none", body: null }),
  getMetrics: Object.freeze({ method: "GET", path: "/metrics", params: [], role: "read", body: null }),
  getNamespace: Object.freeze({ method: "GET", path: "/v1/namespaces/{ns}", params: ["ns"], role: "read", body: null }),
  getOpenAPI: Object.freeze({ method: "GET", path: "/openapi.yaml", params: [], role: "none", body: null }),
  getReady: Object.freeze({ method: "GET", path: "/readyz", params: [], role: "none", body: null }),
  getStats: Object.freeze({ method: "GET", path: "/v1/stats", params: [], role: "read", body: null }),
  getUser: Object.freeze({ method: "GET", path: "/v1/namespaces/{ns}/users/{user}", params: ["ns", "user"], role: "read", body: null }),
  headHealth: Object.freeze({ method: "HEAD", path: "/healthz", params: [], role: "none", body: null }),
  headReady: Object.freeze({ method: "HEAD", path: "/readyz", params: [], role: "none", body: null }),
  importUser: Object.freeze({ method: "PUT", path: "/v1/namespaces/{ns}/users/{user}/export", params: ["ns", "user"], role: "admin", body: "application/octet-stream" }),
  listNamespaces: Object.freeze({ method: "GET", path: "/v1/namespaces", params: [], role: "read", body: null }),
  listUsers: Object.freeze({ method: "GET", path: "/v1/namespaces/{ns}/users", params: ["ns"], role: "read", body: null }),
  purgeNamespace: Object.freeze({ method: "DELETE", path: "/v1/namespaces/{ns}", params: ["ns"], role: "admin", body: null }),
  recordSeen: Object.freeze({ method: "POST", path: "/v1/namespaces/{ns}/users/{user}/seen", params: ["ns", "user"], role: "write", body: "application/json" }),
});

/** Key roles, lowest first; each implies the ones before it. */
export const roles = Object.freeze(["none", "read", "write", "admin"]);

/**
 * @typedef {Object} Auth
 * @property {string} [key_id] The caller's key as the log of admin actions names it, the first 8 hex digits of the key's SHA-256 (`printf %s KEY | sha256sum | cut -c1-8`); absent on an open service.
 * @property {number} max_batch_users The most users one batch call (`POST /v1/namespaces/{ns}/filter`) may name (`--max-batch-users`), a user named twice counting twice; more are refused with 413 `too-many-users`.
 * @property {number} max_body_bytes The largest JSON request body, in bytes (`--max-body-bytes`); a longer one is refused with 413 `body-too-large`. Many long items, each within `max_item_bytes`, can pass it. An import's body has its own limit, `--max-import-bytes`.
 * @property {number} max_candidates The most candidates (or items) one call may send, and each user of a batch (`--max-candidates`); more are refused with 413 `too-many-candidates`.
 * @property {number} max_item_bytes The longest item (or candidate) id, in bytes of UTF-8 (`--max-item-bytes`); a longer one is refused with 400 `item-too-long`.
 * @property {number} max_user_bytes The longest user id, in bytes of UTF-8 (`--max-user-bytes`); a longer one is refused with 400 `bad-request`.
 * @property {Array<string>} [namespaces] The only namespaces whose routes the key may call (`namespaces=` in the keys file), sorted; absent when it may call every namespace's. A name as long as an API key (16 characters or more) under which no namespace is served is left out (it may be a second key given without its role after `namespaces=`), so the list can be empty.
 * @property {boolean} open No keys are configured; every caller has every role.
 * @property {number} [rate_burst] The requests it may make at once before `rate_limit` applies; absent when it is not limited.
 * @property {number} [rate_limit] The requests a second this caller may make (its key's own rate, or the server's `--rate-limit`); absent when it is not limited.
 * @property {Role} role A key's role; `admin` implies `write` implies `read`.
 */

/**
 * @typedef {Object} BatchFilterEntry
 * @property {Array<Item>} candidates
 * @property {number} [limit] As in the one call; absent or 0, no limit.
 * @property {OnError} [on_error] `fail` answers an error when the user's filter cannot be read or written; `open` answers the candidates unfiltered (deduplicated, at most `limit`) with `degraded: true`.
 * @property {RecordMode} [record] Which candidates become seen: `returned` (what comes back), `none` (a dry run), `all` (every candidate).
 * @property {string} user User id (not percent-encoded), 1 to 256 bytes of UTF-8 without control characters. "." and ".." are refused, as in a path: no per-user route could reach them.
 */

/**
 * @typedef {Object} BatchFilterRequest
 * @property {Array<BatchFilterEntry>} requests Each one user's one call; at most `--max-batch-users` of them (100 by default; `GET /v1/auth` says how many as `max_batch_users`).
 */

/**
 * @typedef {Object} BatchFilterResponse
 * @property {Array<BatchFilterResult>} results
 */

/**
 * The one call's answer for one user, or its error.
 * @typedef {Object} BatchFilterResult
 * @property {boolean} [degraded]
 * @property {Problem} [error] An RFC 9457 problem detail.
 * @property {number} [recorded] Items newly added, as in FilterResponse (an item that already tests seen is not added again).
 * @property {boolean} [saturated]
 * @property {number} [seen_count]
 * @property {Array<string>} [unseen]
 * @property {string} user
 */

/**
 * @typedef {Object} CheckResponse
 * @property {Array<boolean>} seen seen[i] says whether items[i] was seen.
 * @property {number} seen_count How many entries of seen are true.
 */

/**
 * The Go collector's work since the server started. With millions of users hot every collection marks all of them (about a second of CPU at a million), and calls that arrive meanwhile wait. CPU figures are the Go runtime's estimates, without the marking the collector does on cores that would otherwise be idle: it takes no CPU from calls, and on a quiet server it would make up most of the collector's share.
 * @typedef {Object} CollectorStats
 * @property {number} allocated_bytes What the server allocated on the Go heap since it started. Its rate paces the collections: over an interval, its growth divided by the calls served is what a call allocates.
 * @property {number} busy_cpu_seconds CPU the whole server took, the collector's included (its idle marking not).
 * @property {number} cpu_seconds CPU the collector took from work (its assists, dedicated marking and pauses).
 * @property {number} cycles Completed collections.
 * @property {number} heap_goal_bytes Heap size at which the next collection starts.
 * @property {number} heap_live_bytes Heap found live by the last collection.
 */

/**
 * @typedef {Object} FieldError
 * @property {string} detail
 * @property {string} [parameter] Name of the offending path, query or header parameter: a parameter of the route (such as `user`, `limit` or `Idempotency-Key`), one the route does not take, or the request's `Content-Type` or `Content-Encoding` (a compressed body; both 415 `unsupported-media-type`).
 * @property {string} [pointer] JSON pointer to the offending member of the request body.
 */

/**
 * A filter's kind, a namespace's (the kind of the filters it makes) or a user's (the kind its filter was made with, which stays when the namespace's changes): `bloom`, a chain of Bloom layers; `compact`, a chain of sorted fingerprint sets whose memory grows with the items (less memory a user); or `staged`, a chain of Bloom layers whose newest layer is kept as sorted fingerprints until it fills (memory that grows with the items, Bloom lookups in the full layers). The README has the measured trade-offs.
 * @typedef {("bloom"|"compact"|"staged")} FilterKind
 */

/**
 * @typedef {Object} FilterRequest
 * @property {Array<Item>} candidates
 * @property {number} [limit] At most this many unseen candidates come back; absent or 0, no limit.
 * @property {OnError} [on_error] `fail` answers an error when the user's filter cannot be read or written; `open` answers the candidates unfiltered (deduplicated, at most `limit`) with `degraded: true`.
 * @property {RecordMode} [record] Which candidates become seen: `returned` (what comes back), `none` (a dry run), `all` (every candidate).
 */

/**
 * @typedef {Object} FilterResponse
 * @property {boolean} [degraded] The filter could not be used and on_error was open; unseen is unfiltered.
 * @property {number} recorded Items this call newly added to the user's filter (0 in a degraded answer, which recorded none). An item that already tests seen when it is added is not added again and does not count: one seen before, or one that tests positive (a false positive, at the namespace's rate) against items this same call added before it. So `recorded` can be less than the candidates returned; items over the namespace's cap are not added either (see `saturated`). In a namespace with a window, "seen before" means in the current time bucket: with `record: all`, an item seen only in an older bucket is added to the current one (it stays seen for the window from now) and counts both here and in `seen_count`.
 * @property {boolean} [saturated] The user is at the namespace's item cap, or at the largest filter the store keeps for one user; some items were not recorded.
 * @property {number} seen_count Distinct candidates that tested seen; 0 in a degraded answer, which tested none.
 * @property {Array<string>} unseen The unseen candidates in request order, each once, at most limit.
 */

/**
 * @typedef {Object} ForgetItemsResult
 * @property {number} forgotten How many of the items (each counted once) tested seen and now test unseen.
 */

/**
 * One time bucket of a windowed filter (the only one, numbered 0, without a window).
 * @typedef {Object} GenerationStats
 * @property {number} bucket Absolute bucket number, start time / granularity.
 * @property {number} items
 * @property {Array<LayerStats>|null} layers
 * @property {string} start When the bucket began (bucket × granularity): the Unix epoch, 1970-01-01T00:00:00Z, for the only bucket of a filter without a window.
 */

/**
 * @typedef {Object} Health
 * @property {boolean} key_required The service has API keys, so that every route but these probes, `/openapi.yaml` and the dashboard's files needs one; false on an open service. It is fixed for the life of the process, and tells a client without a key (the dashboard) that it needs one without a call answered 401, which the service would count in its `errors`.
 * @property {("ok"|"ready")} status `ok` from `/healthz`, `ready` from `/readyz`.
 */

/**
 * @typedef {("merge"|"replace")} ImportMode
 */

/**
 * An item id, 1 to 256 bytes of UTF-8 without control characters.
 * @typedef {string} Item
 */

/**
 * @typedef {Object} ItemsRequest
 * @property {Array<Item>} items
 */

/**
 * @typedef {Object} LayerStats
 * @property {number} bits The layer's bits in memory (a layer of fingerprints, compact or a staged filter's newest: its set, with its index).
 * @property {number} bits_set Bits set (a layer of fingerprints: its fingerprints, one per item).
 * @property {number} capacity
 * @property {number} fill Bits set against bits (a layer of fingerprints, items against capacity).
 * @property {number} fp_rate This layer's false-positive rate now, from its fill (a layer of fingerprints, from its items and fingerprint bits; a staged filter's full layer, from both).
 * @property {number} hashes Bits set per item (0 for a layer of fingerprints, which keeps one per item).
 * @property {number} items
 */

/**
 * @typedef {Object} Namespace
 * @property {number} fp_rate Target false-positive rate.
 * @property {number} granularity Width of one time bucket of the window in seconds; 0 without a window.
 * @property {number} growth Layer i holds initial_capacity * growth^i items.
 * @property {number} initial_capacity Items the first layer holds.
 * @property {FilterKind} kind A filter's kind, a namespace's (the kind of the filters it makes) or a user's (the kind its filter was made with, which stays when the namespace's changes): `bloom`, a chain of Bloom layers; `compact`, a chain of sorted fingerprint sets whose memory grows with the items (less memory a user); or `staged`, a chain of Bloom layers whose newest layer is kept as sorted fingerprints until it fills (memory that grows with the items, Bloom lookups in the full layers). The README has the measured trade-offs.
 * @property {number} max_items Items one user holds at most; 0 means no cap.
 * @property {string} name
 * @property {number} tightening Layer i has error p0 * tightening^i.
 * @property {number} window Retention window in seconds; 0 means forever.
 */

/**
 * @typedef {Object} NamespaceList
 * @property {Array<Namespace>} namespaces
 * @property {Array<string>} not_served Namespaces whose users are stored but that are not served, sorted.
 */

/**
 * One namespace's figures in the hot set, since the server started.
 * @typedef {Object} NamespaceStats
 * @property {number} cache_bytes Bytes accounted to the namespace's hot users, out of the service's `cache_budget_bytes`.
 * @property {number} candidates Distinct candidates the one call tested (filter and batch calls; `/seen`'s items are no candidates).
 * @property {number} evictions The namespace's users taken out of memory, to keep the budget or because a reload took the namespace out.
 * @property {number} hit_ratio Hits over hits plus misses (calls for users with no history left out); 0 before any.
 * @property {number} hits Calls that found the user hot (the calls of `hits` in Stats; a user's stats or export read is none).
 * @property {number} hot_users The namespace's users whose filter is in memory.
 * @property {number} loads Storage reads of the namespace's cold users, never fewer than `misses` plus `no_history_calls` (each takes one); the rest are reads that are no call.
 * @property {number} misses Calls that did not find the user hot and read its history from the store (a call for a user with no history is counted in `no_history_calls` instead).
 * @property {number} new_users The users a recording call or an import created, because nothing was stored for them or because the user was gone past its window (in memory or stored); all but those found gone in memory are among `loads`.
 * @property {number} no_history_calls Calls that did not find the user hot and found no history stored (nothing stored, or all of it past its window; a new user's first call, a check of a user never recorded), neither hits nor misses. A call that finds the user hot is a hit, even when all of its items have passed the window since.
 * @property {number} recorded Items recorded as seen, by every recording route (filter, batch, seen); an item already seen is not recorded again.
 * @property {number} seen_candidates Of `candidates`, those that tested seen and were filtered out; over `candidates`, the share of what the recommender offered that its users had seen.
 */

/**
 * `fail` answers an error when the user's filter cannot be read or written; `open` answers the candidates unfiltered (deduplicated, at most `limit`) with `degraded: true`.
 * @typedef {("fail"|"open")} OnError
 */

/**
 * An RFC 9457 problem detail.
 * @typedef {Object} Problem
 * @property {string} [detail]
 * @property {Array<FieldError>} [errors]
 * @property {string} [instance] The request path; absent when the server refused the request while reading it (408, 431, a chunked body over its limit or malformed, a request line or header it cannot read), which leaves its path unknown, and when it refused the request for its head (a 400 that closes the connection, for a body of ambiguous length, a Host or request target that names no host, a target of a scheme other than http or https, a malformed header line), whose path is no more to be trusted than the rest of it, and for a CONNECT (405), whose target is no path.
 * @property {number} status
 * @property {string} title
 * @property {("https://seenapi.dev/problems/bad-request"|"https://seenapi.dev/problems/invalid-json"|"https://seenapi.dev/problems/too-many-candidates"|"https://seenapi.dev/problems/too-many-users"|"https://seenapi.dev/problems/item-too-long"|"https://seenapi.dev/problems/body-too-large"|"https://seenapi.dev/problems/unknown-namespace"|"https://seenapi.dev/problems/user-not-found"|"https://seenapi.dev/problems/not-found"|"https://seenapi.dev/problems/method-not-allowed"|"https://seenapi.dev/problems/request-timeout"|"https://seenapi.dev/problems/headers-too-large"|"https://seenapi.dev/problems/unauthorized"|"https://seenapi.dev/problems/forbidden"|"https://seenapi.dev/problems/unsupported"|"https://seenapi.dev/problems/namespace-served"|"https://seenapi.dev/problems/idempotency-key-in-use"|"https://seenapi.dev/problems/idempotency-key-reused"|"https://seenapi.dev/problems/unsupported-media-type"|"https://seenapi.dev/problems/bad-import"|"https://seenapi.dev/problems/storage-full"|"https://seenapi.dev/problems/storage-unavailable"|"https://seenapi.dev/problems/corrupt-filter"|"https://seenapi.dev/problems/rate-limited"|"https://seenapi.dev/problems/overloaded"|"https://seenapi.dev/problems/unavailable"|"https://seenapi.dev/problems/internal"|"about:blank")} type The problem's type, one of those listed in the overview, or `about:blank` (RFC 9457's type of a problem that says no more than its status), which the service never sends: a proxy's, or the problem a client makes of an error answer that is not `application/problem+json`. A client takes a type it does not know (of a later version of the service) by its status.
 */

/**
 * @typedef {Object} PurgeResult
 * @property {string} namespace
 * @property {number} users_erased How many users the store held in the namespace.
 */

/**
 * Which candidates become seen: `returned` (what comes back), `none` (a dry run), `all` (every candidate).
 * @typedef {("returned"|"none"|"all")} RecordMode
 */

/**
 * A key's role; `admin` implies `write` implies `read`.
 * @typedef {("read"|"write"|"admin")} Role
 */

/**
 * @typedef {Object} SeenResponse
 * @property {number} recorded Items this call newly added to the user's filter. An item that already tests seen when it is added is not added again and does not count: one seen before, or one that tests positive (a false positive, at the namespace's rate) against items this same call added before it. So `recorded` plus `seen_count` can be less than the distinct items sent (10,000 new items may record 9,942); items over the namespace's cap are not added either (see `saturated`). In a namespace with a window, "seen before" means in the current time bucket: an item seen only in an older bucket is added to the current one (it stays seen for the window from now) and counts both here and in `seen_count`.
 * @property {boolean} [saturated] The user is at the namespace's item cap, or at the largest filter the store keeps for one user; some items were not recorded.
 * @property {number} seen_count Items that had already been seen.
 */

/**
 * @typedef {Object} ServiceStats
 * @property {Object<string, number>} batch_user_errors Errors of a batch's users by their status: each user's `error` in the results of a batch (`POST /v1/namespaces/{ns}/filter`), which is answered 200 and counts in `errors` only if the whole batch is refused. `/metrics` has them as `seenapi_batch_user_errors_total{status="..."}`.
 * @property {number} cache_budget_bytes The budget of `cache_bytes` (--cache-bytes).
 * @property {number} cache_bytes Bytes accounted to hot users.
 * @property {Object<string, number>} calls Calls per route, keyed "METHOD /path/{param}"; a HEAD counts with its GET. Each of the dashboard's files, served at its own path beside `/`, counts as a route of its own (`GET /app.js`), as in `/metrics`' `seenapi_http_requests_total{route="..."}`. A health probe answered on a connection past --max-connections counts with its route. A request refused before its route is found counts in `errors` only, under no route: one refused for its head (400, 431), for its body over its route's limit (413, from its Content-Length or as it was read), for its slowness (408), or for a path no route has (404) or a method its path does not take (405).
 * @property {number} candidates Distinct candidates the one call tested (filter and batch calls; `/seen`'s items are no candidates). `/metrics` has them as `seenapi_candidates_total`.
 * @property {CollectorStats} collector The Go collector's work since the server started. With millions of users hot every collection marks all of them (about a second of CPU at a million), and calls that arrive meanwhile wait. CPU figures are the Go runtime's estimates, without the marking the collector does on cores that would otherwise be idle: it takes no CPU from calls, and on a quiet server it would make up most of the collector's share.
 * @property {number} connections Client connections open now; past --max-connections a new one is answered 503 overloaded and closed.
 * @property {number} degraded Answers given unfiltered because on_error was open.
 * @property {number} dirty_users Users with changes not yet written back, hot or evicted and waiting for their write-back (so there can be more of them than `hot_users`).
 * @property {Object<string, number>} errors Error responses by HTTP status, but the 404 `user-not-found` answers, counted in `users_not_found`, and the 503 of `/readyz` while the service is not ready, counted in `not_ready`. `/metrics` has them as `seenapi_http_errors_total{status="..."}`.
 * @property {number} evictions Users taken out of memory: the least recently used, to keep `cache_bytes` within `cache_budget_bytes`, and every hot user of a namespace a reload (SIGHUP) takes out of the namespaces file. `/metrics` has them as `seenapi_evictions_total`.
 * @property {number} flush_lag_ns Age of the oldest change not yet written back, in nanoseconds.
 * @property {number} flushed_users Filters the write-back rounds (`flushes`) and a graceful stop wrote to the store. A change stored at once is not written back and is not among them: an erased user, items forgotten in a compact namespace, an import, a bulk `/seen` (`?bulk=true`) of a user not in memory.
 * @property {number} flushes Write-back rounds that had users to write.
 * @property {number} hit_ratio Hits over hits plus misses (calls for users with no history left out; a user's stats or export read is no call, see `hits`); 0 before any.
 * @property {number} hits Calls that found their user in memory (a batch counts one for each of its users). The calls counted here, in `misses`, `no_history_calls` and so in `hit_ratio`, are those that filter, check, record or forget a user's items (one user's or a batch's), or import a filter. Reading a user, its stats (the dashboard's user look-up) or its export, is no call and counts in none of them, so that looking users up does not move the ratio the cache budget is judged by; it still brings a cold user into memory (a storage read, in `loads`).
 * @property {number} hot_users Users whose filter is in memory now (evicted ones waiting for their write-back are not).
 * @property {number} idempotency_bytes Bytes those take, against --idempotency-bytes.
 * @property {number} idempotency_kept Calls with an Idempotency-Key whose answers are kept now (those in flight too).
 * @property {number} idempotent_replays Answers given again to retries with the same Idempotency-Key (a batch's: one). Each counts in `calls` under its route, and in none of the hot set's figures (hits, candidates, recorded, journal appends): the first answer counted those.
 * @property {number} in_flight Requests being served now that --max-in-flight bounds: this one among them (so 1 on an idle service), the health probes and `/metrics` not (whose `seenapi_in_flight_requests` reads 0 then).
 * @property {number} journal_appends Journal records appended, one for each call (a batch: each of its users) that recorded an item, before it answered; a call that recorded none (all seen, a dry run, a check, a forget) appends none, nor does a bulk `/seen` (`?bulk=true`) of a user not in memory, which writes the user's filter at once.
 * @property {number} loads Storage reads of cold users, never fewer than `misses` plus `no_history_calls`. A miss or a call for a user with no history takes one (a user new to a batch sent with an `Idempotency-Key` two, one to check the key and one for its call; a user new to an import two, one to find it absent and one to create it), and so does each read that is no call: a cold user's stats or export (which bring it into memory), a cold user's summary in a page of users (which does not), and each user whose journal the start folds in (a crash's, or a restored backup's).
 * @property {number} misses Calls that did not find their user in memory and read its history from the store. A call for a user with no history is no miss but counted in `no_history_calls` (earlier versions counted it here, which made a fresh service's hit ratio read as a cache too small).
 * @property {Object<string, NamespaceStats>} namespaces Each namespace served since the start (one a reload took out too), with its share of the hot users, cache bytes, hits, misses, loads, new users, evictions, candidates, seen candidates and items recorded above (they sum to them), keyed by namespace name; to tell which namespace fills the budget and which one misses.
 * @property {number} new_users Users created by a recording call or an import (of a filter that recorded items), because nothing was stored for them (no filter, no journal) or because the user was gone past its window, whether its filter was still in memory or only stored; all but those found gone in memory are among `loads`, the storage reads of cold users.
 * @property {number} no_history_calls Calls that did not find their user in memory and found no history stored: nothing stored, or all of it past its window (a new user's first call, a check of a user never recorded). No cache could have held such a user, so they are neither hits nor misses and leave `hit_ratio` out. A call that finds its user in memory is a hit, even when all of the user's items have passed the window since: the cache spared it a storage read (a recording call then makes the user anew, counted in `new_users`). So each call counted here took a storage read, in `loads`. `hits + misses + no_history_calls` are the calls' looks at their users. `/metrics` has them as `seenapi_cache_no_history_total`.
 * @property {number} not_ready Answers 503 `unavailable` of `/readyz` (`GET` or `HEAD`) while the service was not ready: starting (the journal not yet folded in) or draining (on `SIGTERM`, through `--drain-delay`). That is the probe working as designed, and an orchestrator polls it every few seconds through a long start, so `errors` leaves them out. A 503 of any other route (the store failing, the service overloaded) is an error. `/metrics` has them as `seenapi_not_ready_total`.
 * @property {number} panics Bugs met and recovered since start. A request answered 500 `internal`, a batch's user whose result is an `internal` error (the batch's other users are served), or a step on one user's data (loading, writing back, erasing) that failed and is retried, instead of the process ending; the log has each stack.
 * @property {number} recorded Items recorded as seen, by every recording route (filter, batch, seen); an item already seen is not recorded again. `/metrics` has them as `seenapi_items_recorded_total`.
 * @property {Array<string>} removed_namespaces Those of `namespaces` that a reload (SIGHUP) took out of the namespaces file; no longer served, their figures kept since the start.
 * @property {number} seen_candidates Of `candidates`, those that tested seen and were filtered out; over `candidates`, the share of what the recommender offered that its users had seen. `/metrics` has them as `seenapi_candidates_seen_total`.
 * @property {string} started_at When this process started; the counts of these figures are since then, and a restart sets them to 0.
 * @property {number} storage_bytes Bytes the data directory's files take on disk (allocated blocks): the store's tables, value log and memtables, the journal, and the answers kept for retries.
 * @property {number} storage_errors Storage operations that failed: a journal append, a load, a write-back batch, a write at once (an erase, a forget, an import), a purge or the listing of stored namespaces.
 * @property {boolean} storage_full The store refuses writes for lack of disk space (free space under `--min-free-bytes`, or a write that met a full disk), so calls that record get 507 `storage-full` until space comes back; reads are served. `/metrics` has it as `seenapi_storage_full`.
 * @property {Array<StorageLevel>} storage_levels The store's LSM tree, level 0 first: its tables and bytes per level. Level 0 gains a table at each memtable flush until a compaction merges its tables into the level below; with users spread over the whole key space that rewrites about every user's key and takes CPU while it runs, so a level 0 that empties marks one (to correlate with a latency spike). Also in `/metrics` as `seenapi_storage_level_tables` and `seenapi_storage_level_bytes`.
 * @property {number} uptime_seconds Seconds since `started_at`.
 * @property {number} users_not_found Answers 404 `user-not-found`: a user's stats or export asked for a user with no history (never recorded, erased, or gone past its window). The answer settles the question, and is no fault of the service or of the request, so `errors` leaves them out: a user looked up in the dashboard, or a client asking after users it has not recorded yet, does not raise the figure watched for faults. `/metrics` has them as `seenapi_users_not_found_total`.
 */

/**
 * @typedef {Object} StorageLevel
 * @property {number} bytes
 * @property {number} level
 * @property {number} tables
 */

/**
 * @typedef {Object} UserList
 * @property {Array<UserSummary>} [details] With `?details=true` (and only then), a summary of each user of `users`, in the same order; a user forgotten between the listing and its summary is left out.
 * @property {string} [next] The `after` of the next page; absent on the last page.
 * @property {Array<string>} users User ids, in byte order.
 */

/**
 * @typedef {Object} UserStats
 * @property {number} bits The bits of all its layers (LayerStats bits, summed).
 * @property {number} bits_set The bits set of its Bloom layers plus the fingerprints of its layers of fingerprints (LayerStats bits_set, summed): a staged filter has both, and its layers (hashes 0: fingerprints) tell them apart.
 * @property {boolean} dirty The filter has changes not yet written back.
 * @property {number} encoded_bytes
 * @property {string} first_seen When the user's first item was recorded, to the minute (what storage keeps, so it reads the same before and after a restart).
 * @property {number} fp_rate Estimated false-positive rate now.
 * @property {Array<GenerationStats>|null} [generations]
 * @property {number} granularity Width of one time bucket of the filter's window in seconds; 0 without a window.
 * @property {boolean} hot The filter was in memory when the call came. Reading a user's stats (like any call on the user but a bulk recording) brings a user from storage into memory, so a second read says true.
 * @property {number} items Items added inside the window. An item added twice in one time bucket counts once; in a namespace with a window, one recorded again in a later bucket (`record: all`, `/seen`) counts once in each bucket that holds it, as it does against `max_items`.
 * @property {FilterKind} kind A filter's kind, a namespace's (the kind of the filters it makes) or a user's (the kind its filter was made with, which stays when the namespace's changes): `bloom`, a chain of Bloom layers; `compact`, a chain of sorted fingerprint sets whose memory grows with the items (less memory a user); or `staged`, a chain of Bloom layers whose newest layer is kept as sorted fingerprints until it fills (memory that grows with the items, Bloom lookups in the full layers). The README has the measured trade-offs.
 * @property {string} last_seen When the user's last item was recorded, to the minute.
 * @property {number} layers
 * @property {number} max_items Items the filter holds at most; 0 means no cap.
 * @property {number} memory_bytes
 * @property {boolean} saturated At the filter's item cap, or at the largest filter the store keeps for one user (or that a filter can be); new items are not recorded.
 * @property {number} target_fp_rate
 * @property {number} window The filter's retention window in seconds (0: forever). This, granularity, max_items, kind and target_fp_rate are the profile the filter was made with, which a namespace whose profile changed since (a SIGHUP, or a restart with another namespaces file) no longer has: a filter keeps its own.
 */

/**
 * A few of one user's stats (GET /v1/namespaces/{ns}/users/{user} has them all), or the error its filter met: one user's fault never fails the page.
 * @typedef {Object} UserSummary
 * @property {Problem} [error] An RFC 9457 problem detail.
 * @property {number} [fp_rate] Estimated false-positive rate now.
 * @property {boolean} [hot] Whether the user is in memory.
 * @property {number} [items] Items the filter holds (inside the window).
 * @property {string} [last_seen] The user's last recording.
 * @property {number} [memory_bytes] Bytes of the filter in memory.
 * @property {string} user
 */
