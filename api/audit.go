package api

import (
	"encoding/hex"

	"github.com/gofiber/fiber/v2"
)

// The admin actions that erase, replace or take out data (a user erased, a
// filter imported, a namespace purged, a backup taken) are logged at info
// with who asked, so that an operator can answer "who erased this user, and
// when" from the log. A caller is named by its key's id, or on an open
// server by its address; never by its key.

// keyID is what names a key in the log and in GET /v1/auth: the first 8
// hex digits of its SHA-256 (`printf %s KEY | sha256sum | cut -c1-8`), too
// few to find the key by, enough to tell a keys file's keys apart.
func keyID(d [32]byte) string { return hex.EncodeToString(d[:4]) }

// caller names who made the request, "key ID" or "address IP", and
// returns its key (zero on an open service): the key admit admitted, even
// if the keys were reloaded since.
func (s *Server) caller(c *fiber.Ctx) (string, keyMatch) {
	if s.keys.Load().open() { // a service open at its start stays open
		return "address " + c.IP(), keyMatch{}
	}
	m := admitted(c)
	return "key " + keyID(m.id), m
}

// audit logs an admin action, msg with args, and who asked.
func (s *Server) audit(c *fiber.Ctx, msg string, args ...any) {
	by, _ := s.caller(c)
	s.cfg.Logger.Info(msg, append(args, "by", by)...)
}
