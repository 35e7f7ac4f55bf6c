// Package eviction is the hot set: it holds user filters in memory under a
// byte budget, loads cold users from storage, journals every recording call
// before it is acknowledged and writes changed filters back in batches.
//
// # Layout
//
// Users are spread over a power-of-two number of shards by a hash of
// (namespace, user). Each shard is a golang-lru simplelru (the thread-unsafe
// core) under the shard's own lock, with a byte count: after every insert
// or growth, while the whole set is over CacheBytes, the shard evicts its
// least recently used users until it is within its share, CacheBytes/Shards,
// and then so do the other shards over theirs. A shard may hold more than
// its share while the set is under budget, so that a user larger than a
// share does not empty its shard, itself included; the sweep may empty a
// shard, so a budget of fewer users than shards holds too. A user costs its filter's MemoryBytes plus
// entryOverhead plus its id's length. An entry holds the filter by value,
// the user's namespace as an index (at most 256 namespaces) and, for ids
// shorter than 255 bytes, the id in the same allocation: one allocation a
// hot user besides golang-lru's element and the filter's arrays. Calls
// for one user are serialized by the entry's own lock; calls for different
// users share at most a shard lock held for a map lookup. Lock order: entry
// before shard.
//
// # Loading
//
// A cold user is read once however many calls want it (single flight):
// the first call loads, the others wait for it. Loading reads the stored
// filter and the journal entries not yet covered by it and replays them.
//
// # Durability
//
// A call that records first selects the hashes to record, appends them to
// the journal (the store groups concurrent appends into one write) and
// only then applies them and answers: an acknowledged impression survives
// kill -9, and a call whose journal write failed changes nothing (a user
// made for it leaves the cache again: see releaseRefused). The write-
// back loop stores each dirty filter merged by OR into what is stored (so
// a second writer, a replayed journal or a restore can never roll a user
// back) and retires the journal records it covers; while the hot set is
// the store's only writer its values already include what is stored, and
// the store writes them without reading (storage.Store.Attach). It runs every
// FlushInterval/100 and writes the users that changed FlushInterval ago or
// more, so the work is spread out instead of arriving in one burst, and a
// user called many times in between is written once; it also writes every
// evicted user at once (but one whose journal holds a keyed call's answer
// the API may not have written yet: it waits as a hot one would, while
// such users take little memory), and everything at Close. A dirty user evicted
// before its write-back, or while it runs, stays reachable (the shard's
// evicted map) until the write-back lands, so eviction never loses a
// change, even with the journal off, and no second copy of the user is
// loaded while one is being written; past a sixteenth of the budget in such users, calls that load a
// user wait for the write-back (at most two rounds of it), so memory stays
// near the budget however fast users come.
//
// # Size
//
// A filter is written back whole, as one value, and the store keeps values
// of at most its MaxValueBytes (a Badger value-log file). The hot set holds
// every filter to that (userfilter.Filter.Full, and Commit's and
// AddHashes' limit): a user whose next item needs more saturates as at its
// namespace's max_items. Its items stay seen, new ones are not recorded
// (nor journalled) and its calls say saturated, so it never becomes a user
// that cannot be written back, dirty for good with its journal live.
//
// # Faults
//
// A panic met while handling one user's data (loading it, encoding it
// for write-back, merging it into what is stored, erasing it; a bug, since
// decoding never panics on bad bytes) fails that step for that user only
// and is counted in Stats.Panics: it becomes the step's error,
// the stack is logged (at most every 10 s), no lock or load claim is left
// held, and a write-back that failed keeps the user dirty and its journal,
// to be retried next round. A panic in the store's write of a batch keeps
// the whole batch dirty. Repeated write-back failures are logged at most
// every 10 s with a count of the rounds that failed.
//
// # Erase
//
// Forget holds the user's load slot and the write-back lock while it drops
// the user from memory and deletes it from the store, so neither a
// concurrent load nor a write-back already under way can bring it back.
// ForgetItems (compact namespaces) holds the write-back lock and the user's
// lock, and writes the user's filter whole before it answers, replacing the
// stored one and superseding its journal as Import with replace does: a
// write-back's union, or a replayed journal record, would bring a
// forgotten item back. Import with replace over a user that cannot be
// read holds its load slot as Forget does, and writes the filter with the
// user's journal void in one commit (storage.Write.VoidJournal): the
// erase and the import are one step, which a crash cannot cut in two.
// PurgeNamespace erases a whole namespace that is not
// served: it holds the namespaces lock (no reload serves it meanwhile),
// fails the loads of its users by calls made before it was taken out
// (they may have read what it erases) and waits for those in flight,
// drops its users still in memory under the write-back lock without
// writing them, then erases it from the store.
//
// # Retention
//
// Filters of windowed namespaces are written with a time-to-live that ends
// when their newest bucket leaves the window, and journal entries with one
// of a window plus a bucket, so the store drops users untouched for longer
// than their window on its own (Badger expires them at compaction).
// Expired buckets inside a live filter are dropped at every call and
// write-back. A user's earlier records expire before its later ones, so
// the record of a call to a filter with a cap keeps the room the cap left
// the call, and its replay lets in that much whatever the records still
// there hold (see journal.go).
//
// A windowed user with no item left in the window is gone (see gone), as is
// a windowless one whose filter never recorded an item (earlier builds
// stored such users, of an import of a filter that never recorded; the
// store's listing reads short values to leave them out, see NoHistory): its
// stats and export answer ErrUserNotFound, a call that records makes it
// anew with the namespace's profile, and it leaves the cache at its
// write-back or its next look-up, or at once when an import or a forget
// of items writes it with no item; one that nobody looks up is found by
// the reaper, which the write-back loop runs a few users of each shard at
// a time (see reap.go). A filter found empty at a write-back is
// written Empty (storage.Write): hidden from the listing, it stays only as
// long as the journal records it covers may (a window and a bucket), so
// that none is replayed after a restart; deleting it at once would drop
// its cover mark with it.
//
// # Concurrency
//
// Every exported method of HotSet is safe for concurrent use.
package eviction
