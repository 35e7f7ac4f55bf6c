package userfilter

import "errors"

var (
	// ErrBadProfile is returned for a profile whose parameters cannot build a filter.
	ErrBadProfile = errors.New("userfilter: bad profile")
	// ErrCorrupt is returned when an encoded filter fails its checksum or structure checks.
	ErrCorrupt = errors.New("userfilter: corrupt encoding")
	// ErrVersion is returned for an encoding of a version this build does not read.
	ErrVersion = errors.New("userfilter: unknown encoding version")
	// ErrTooLarge is returned by DecodeWithin for a filter over its limit.
	ErrTooLarge = errors.New("userfilter: filter larger than allowed")
	// ErrIncompatible is returned when merging filters built with different parameters.
	ErrIncompatible = errors.New("userfilter: filters built with different parameters")
	// ErrUnsupported is returned by Forget for a filter kind that cannot forget items.
	ErrUnsupported = errors.New("userfilter: not supported by this filter kind")
)
