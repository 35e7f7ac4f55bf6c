package storage

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// badgerLogger adapts a slog.Logger to Badger's Logger: errors and warnings
// keep their level, Badger's chatty info and debug messages become debug.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) log(level slog.Level, format string, args []any) {
	if !b.l.Enabled(context.Background(), level) {
		return
	}
	b.l.Log(context.Background(), level, "badger: "+strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (b badgerLogger) Errorf(f string, a ...any)   { b.log(slog.LevelError, f, a) }
func (b badgerLogger) Warningf(f string, a ...any) { b.log(slog.LevelWarn, f, a) }
func (b badgerLogger) Infof(f string, a ...any)    { b.log(slog.LevelDebug, f, a) }
func (b badgerLogger) Debugf(f string, a ...any)   { b.log(slog.LevelDebug, f, a) }
