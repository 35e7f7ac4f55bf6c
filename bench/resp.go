package bench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"time"
)

// respPool is a minimal Redis client for the load itself: a pool of
// connections, each call writing one pipeline of commands in RESP and
// reading their replies, without a per-command allocation. It exists to
// measure how much of a Redis system's figures is go-redis's client cost
// (RedisOptions.Client "resp"); go-redis remains the default. Safe for
// concurrent use.
type respPool struct {
	addr  string
	conns chan *respConn
}

type respConn struct {
	c   net.Conn
	r   *bufio.Reader
	buf []byte
}

func newRespPool(addr string, size int) *respPool {
	p := &respPool{addr: addr, conns: make(chan *respConn, size)}
	for range size {
		p.conns <- nil // dialled on first use
	}
	return p
}

func (p *respPool) get(ctx context.Context) (*respConn, error) {
	var c *respConn
	select {
	case c = <-p.conns:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if c != nil {
		return c, nil
	}
	nc, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", p.addr)
	if err != nil {
		p.conns <- nil
		return nil, err
	}
	return &respConn{c: nc, r: bufio.NewReaderSize(nc, 64<<10), buf: make([]byte, 0, 64<<10)}, nil
}

// put returns c to the pool; a connection that failed is closed and replaced.
func (p *respPool) put(c *respConn, failed bool) {
	if failed {
		c.c.Close()
		c = nil
	}
	p.conns <- c
}

func (p *respPool) close() {
	for range cap(p.conns) {
		if c := <-p.conns; c != nil {
			c.c.Close()
		}
	}
}

// appendArrayHeader appends the header of a command of n arguments.
func appendArrayHeader(b []byte, n int) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

// appendBulk appends one argument as a bulk string.
func appendBulk(b []byte, s string) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// appendBulkInt appends an integer argument as a bulk string.
func appendBulkInt(b []byte, v uint64) []byte {
	var tmp [20]byte
	d := strconv.AppendUint(tmp[:0], v, 10)
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(d)), 10)
	b = append(b, '\r', '\n')
	b = append(b, d...)
	return append(b, '\r', '\n')
}

// readInt reads one integer reply (":n\r\n").
func (c *respConn) readInt() (int64, error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 4 || line[0] != ':' {
		return 0, fmt.Errorf("%w: redis replied %q", ErrBadAnswer, line)
	}
	return strconv.ParseInt(string(line[1:len(line)-2]), 10, 64)
}

// readOK reads the reply of a conditional SET: true for "+OK", false for
// a null ("$-1" in RESP2, "_" in RESP3: not set).
func (c *respConn) readOK() (bool, error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return false, err
	}
	switch string(line) {
	case "+OK\r\n":
		return true, nil
	case "$-1\r\n", "_\r\n":
		return false, nil
	}
	return false, fmt.Errorf("%w: redis replied %q", ErrBadAnswer, line)
}

// readIntArray reads an array reply of integers into dst.
func (c *respConn) readIntArray(dst []int64) ([]int64, error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return dst, err
	}
	if len(line) < 4 || line[0] != '*' {
		return dst, fmt.Errorf("%w: redis replied %q", ErrBadAnswer, line)
	}
	n, err := strconv.Atoi(string(line[1 : len(line)-2]))
	if err != nil {
		return dst, err
	}
	for range n {
		v, err := c.readInt()
		if err != nil {
			return dst, err
		}
		dst = append(dst, v)
	}
	return dst, nil
}

// do writes c.buf (holding the pipeline) and lets read consume the replies.
func (p *respPool) do(ctx context.Context, build func(b []byte) []byte, read func(c *respConn) error) error {
	c, err := p.get(ctx)
	if err != nil {
		return err
	}
	c.buf = build(c.buf[:0])
	if dl, ok := ctx.Deadline(); ok {
		_ = c.c.SetDeadline(dl)
	} else {
		_ = c.c.SetDeadline(time.Time{})
	}
	if _, err := c.c.Write(c.buf); err != nil {
		p.put(c, true)
		return err
	}
	err = read(c)
	p.put(c, err != nil)
	return err
}
