//go:build !linux

package storage

// canPageOut: MADV_PAGEOUT is Linux's; elsewhere the value log's pages are
// left to the system (ReleaseInterval does nothing).
const canPageOut = false

func pageOutValueLog(string) (int64, error) { return 0, nil }

func readValueLogAtRandom(string) (int64, error) { return 0, nil }
