// Package bench is seenapi's benchmark harness: it drives the reference
// workload (WORKLOAD.md) through one adapter per system, one system after
// the other in the same process and on the same machine, and measures what
// the README and issue notes quote. cmd/seenbench is its command.
//
// # Workload
//
// Workload and Gen generate the feed workload deterministically from a
// seed: U users, chosen per call by a Zipf law (s = 1.1) over their ranks
// (rank 0 the most popular) or uniformly; each user has a pool of P = 2000
// items derived from hash(user, j); a call offers 200 distinct items drawn
// from the user's pool with limit 20, record returned. User ids are 6 to 16
// bytes, item ids 8 to 24. A Gen's call costs one allocation.
//
// # Systems
//
// A System is set up fresh for each user count, called concurrently, and
// closed: seenapi over HTTP (a server process built from the module),
// seenapi's hot set in-process (the ceiling; package inproc, which also
// serves the API inside the harness to profile the HTTP layer), Redis with
// a SET per user
// (SMISMEMBER then SADD), Redis with a bitmap Bloom filter per user (k
// GETBITs per candidate pipelined, SETBITs for the recorded, m and k of a
// 1% filter for P items, the same for every user). redis-server is Debian's,
// started by the harness on a free loopback port with persistence off, and
// stopped by it.
//
// # Method
//
// Run measures one system at one user count, in phases:
//
//  1. fill: one call per user offering Fill items with limit Fill, so every
//     user has a history (a Recorder records the items of unchecked users
//     directly: the Redis systems, whose fill by calls would take hours at
//     U = 1e6); memory per user is measured right after it, as
//     (memory now - memory right after start) / users. Users are filled in
//     the order a stream of U calls last drew them (Source.FillOrder), so a
//     hot set smaller than U starts the measured phases in its steady
//     state rather than holding the least popular users;
//  2. settle: for a Settler (seenapi), wait until the fill's write-back
//     backlog is gone, so the measured phases see the steady state;
//     warm-up: closed-loop load, not measured; with RunOptions.Levels (what
//     seenbench runs by default: 16, 32, 64 and 128) a closed loop at each
//     level in turn, keeping the level of the most calls a second: too few
//     goroutines leave the cores idle while calls are in flight, and how
//     many are enough differs by system;
//  3. saturation: closed loop at that many goroutines (Concurrency without
//     Levels), each calling as soon as the previous answer arrives;
//     calls/s, and the server's CPU time (user + system, /proc/<pid>/stat)
//     over the phase divided by its calls;
//  4. open loop: after the saturation's backlog is worked off (Settler),
//     calls on a fixed schedule at OpenFraction of the measured saturation
//     rate; each latency runs from the call's intended send time,
//     so a stall is charged to every call it delays (no coordinated
//     omission); recorded in HdrHistogram;
//  5. one more checked call for every sampled user; cache statistics; a
//     flush and the data directory's size; for a system that can restart,
//     a restart and one call per sampled user (the cold-user latency, and
//     proof that nothing recorded was lost).
//
// Figures that other processes on the machine disturb (all but CPU/call)
// come with OtherLoad: the CPU other processes took during the saturation
// phase, from /proc/stat. Each phase also reports Steal, the CPU the host
// held back from this virtual machine as far as the guest kernel counts it.
// The host also slows the CPUs without counting it: the open loop runs a
// SpeedProbe beside the calls, reports the share of its 100 ms slots in
// which the CPU ran at under half speed, and gives the latency of the calls
// away from those slots (Phase.Calm) next to the latency of all of them.
//
// A window run (RunOptions.Window) gives the system a retention window and
// a clock the harness advances faster than real time (SimClock); the
// tracker then expects items older than the window plus one bucket to test
// unseen again. Only the in-process system takes a clock.
//
// Correctness rides along: a Tracker keeps the exact seen set of a sample
// of users (every stride-th rank) and checks every answer they get for
// false negatives (a shown item called unseen: must be none) and false
// positives (never-shown items called seen, over never-shown items
// classified, each (user, item) counted once: see Tracker). Calls of one
// sampled user are serialized by the tracker.
//
// # Concurrency
//
// Workload and Source are safe for concurrent use; a Gen is not (one per
// goroutine). Systems' Call is safe for concurrent use; Setup, Close and
// the measurement methods are called by one goroutine. Tracker and Progress
// are safe for concurrent use.
package bench
