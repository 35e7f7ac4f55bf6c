//go:build linux

package api

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// socketWatch looks at a connection's socket through a descriptor of its
// own, so that it can still tell what the client acknowledged after the
// server closed the connection: a client that reads the end of a stream
// and closes at once would otherwise take the answer with it.
type socketWatch struct{ fd int }

// watchSocket returns a watch of conn's socket, or errDeliveryUnknown for
// a connection that is not a TCP socket. A connection that wraps another
// (TLS, or the listeners' own wrappers) gives it by NetConn, as tls.Conn
// does: the socket is the innermost one's.
func watchSocket(conn net.Conn) (*socketWatch, error) {
	for {
		w, ok := conn.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		conn = w.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil, errDeliveryUnknown
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	if cerr := raw.Control(func(s uintptr) { fd, err = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	return &socketWatch{fd: fd}, nil
}

// delivered returns how many bytes the client has acknowledged, whether
// any byte written is not acknowledged yet, and whether the connection
// was reset (the client went away or refused more).
func (w *socketWatch) delivered() (acked uint64, pending, reset bool, err error) {
	info, err := unix.GetsockoptTCPInfo(w.fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return 0, false, false, err
	}
	return info.Bytes_acked, info.Unacked > 0 || info.Notsent_bytes > 0, info.State == tcpClose, nil
}

// close releases the watch's descriptor; with reset, the socket is reset
// so that what the kernel holds for the client is not delivered.
func (w *socketWatch) close(reset bool) {
	if reset {
		_ = unix.SetsockoptLinger(w.fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	}
	_ = unix.Close(w.fd)
}

// tcpClose is the TCP state of a socket reset or closed on both sides
// (Linux's TCP_CLOSE).
const tcpClose = 7

// errDeliveryUnknown: the connection is not a socket a watch can follow.
var errDeliveryUnknown = errors.New("delivery unknown")
