// Command seenapi runs the seenapi service: per-user "already seen" filters
// for recommender systems, hot in memory, written back to an embedded
// Badger store, answered over REST.
//
// Usage:
//
//	seenapi [serve] [flags]           run the service (the default)
//	seenapi check [flags]             check serve's keys, namespaces, certificate and flags, starting nothing
//	seenapi backup --out FILE [flags] write a backup of the running service (--url) or of --data-dir (service stopped)
//	seenapi restore --in FILE [flags] restore a backup into --data-dir (service stopped)
//	seenapi import-redis [flags]      record the items of Redis sets, one a user, in a running service
//	seenapi new-key [flags]           make a random API key, as a line of a keys file
//	seenapi version                   which build this is (also --version)
//	seenapi help [COMMAND]            what a command does and its flags
//
// Every flag has an environment variable: --cache-bytes is
// SEENAPI_CACHE_BYTES, and so on; a flag given on the command line wins.
// API keys come from --keys-file (one "ROLE:KEY" a line, # comments) and
// SEENAPI_KEYS ("role:key,role:key"). Without keys the service listens on a
// loopback address only, unless --insecure. Namespace profiles come from the
// YAML file --namespaces; "default" exists without one. `seenapi --help`
// lists every flag with its default.
//
// On SIGTERM or SIGINT the service stops accepting connections, finishes
// the requests in flight, writes every changed filter back, and closes the
// store; a second SIGTERM or SIGINT ends it at once (the journal keeps
// every acknowledged change). On SIGHUP it reloads the API keys (--keys-file and SEENAPI_KEYS),
// the namespaces file and, when it serves HTTPS (--tls-cert and --tls-key),
// its certificate; seenapi check, given the service's flags, says before
// whether they load.
package main
