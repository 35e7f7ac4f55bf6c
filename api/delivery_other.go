//go:build !linux

package api

import (
	"errors"
	"net"
)

// socketWatch follows a socket on Linux only; elsewhere a backup is logged
// as taken once its last byte is handed to the connection.
type socketWatch struct{}

func watchSocket(net.Conn) (*socketWatch, error) { return nil, errDeliveryUnknown }

func (*socketWatch) delivered() (acked uint64, pending, reset bool, err error) {
	return 0, false, false, errDeliveryUnknown
}

func (*socketWatch) close(bool) {}

var errDeliveryUnknown = errors.New("delivery unknown")
