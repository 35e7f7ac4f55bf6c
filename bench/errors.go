package bench

import "errors"

// Sentinel errors; wrapped with %w where returned.
var (
	// ErrBadConfig: a workload or run parameter is out of range.
	ErrBadConfig = errors.New("bench: bad configuration")
	// ErrBadAnswer: a system answered something that is not a valid answer
	// to the call (an item that is not a candidate, out of order, over the limit).
	ErrBadAnswer = errors.New("bench: bad answer")
	// ErrServer: a server process could not be built, started, reached or stopped.
	ErrServer = errors.New("bench: server process")
	// ErrMemoryLimit: a system's memory would exceed the run's limit; the run
	// of that system stops at that user count.
	ErrMemoryLimit = errors.New("bench: memory limit reached")
	// ErrRedisMissing: redis-server is not installed and could not be installed.
	ErrRedisMissing = errors.New("bench: redis-server missing")
	// ErrUnsupported: the system does not offer this measurement.
	ErrUnsupported = errors.New("bench: not supported by this system")
)
