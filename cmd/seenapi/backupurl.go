package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/seenapi/seenapi/client"
	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
)

// backupFromService downloads a backup from the running service at url
// (GET /v1/backup, an admin key, trusting caCert's authorities too when
// it is not empty) into out. The stream is checked whole as it
// arrives (storage.VerifyBackup) and written to a temporary file beside out,
// which becomes out only then: a backup cut short, by a dropped connection
// or a failure on the service's side once the answer began, is never kept;
// one the service stopped (its stop mark) is reported with its cause.
func backupFromService(ctx context.Context, url, key, caCert, out string, skipDamaged bool, logger *slog.Logger) (err error) {
	if err := checkOut(out); err != nil {
		return err
	}
	transport, err := serviceTransport(caCert)
	if err != nil {
		return err
	}
	httpc := &http.Client{Transport: transport}
	defer httpc.CloseIdleConnections()
	api, err := client.NewClient(strings.TrimRight(url, "/"), client.WithHTTPClient(httpc),
		client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			if key != "" {
				r.Header.Set("Authorization", "Bearer "+key)
			}
			return nil
		}))
	if err != nil {
		return fmt.Errorf("--url: %w", err)
	}
	traced, handshakeFailed := watchHandshake(ctx)
	var params *client.GetBackupParams
	if skipDamaged {
		params = &client.GetBackupParams{SkipDamaged: &skipDamaged}
	}
	resp, err := api.GetBackup(traced, params)
	if err != nil {
		return fmt.Errorf("seenapi at %s: %w", shownURL(url), schemeHint(trustHint(err), url, handshakeFailed()))
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return fmt.Errorf("seenapi at %s: %w", shownURL(url), routeHint(keyHint(client.ProblemOf(resp, body), "admin", "not limited to some namespaces (namespaces=)"), url))
	}
	// A captive portal's or a proxy's page, answered 200, is not a backup
	// cut short: say what came instead.
	if err := client.MediaTypeError(resp, "application/octet-stream"); err != nil {
		return fmt.Errorf("seenapi at %s: %w; nothing was kept", shownURL(url), err)
	}
	f, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".part-*")
	if err != nil {
		return fmt.Errorf("--out %s: %w", out, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	held, err := storage.VerifyBackup(io.TeeReader(resp.Body, w), eviction.NoHistory())
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("backup interrupted: %w", ctx.Err())
		}
		// The service's word that it stopped the backup: not a dropped
		// connection, which a retry would get past.
		if stopped := (*storage.BackupStoppedError)(nil); errors.As(err, &stopped) {
			if stopped.User != "" {
				return fmt.Errorf("seenapi at %s stopped the backup: %s; nothing was kept",
					shownURL(url), damagedUserAdvice(stopped.NS, stopped.User, stopped.Reason, ""))
			}
			return fmt.Errorf("seenapi at %s stopped the backup: %s (its log says more); nothing was kept",
				shownURL(url), stopped.Reason)
		}
		return fmt.Errorf("the backup from %s is not whole (%w); nothing was kept", shownURL(url), err)
	}
	if err := errors.Join(w.Flush(), f.Sync(), f.Close()); err != nil {
		return err
	}
	// A link, unlike a rename, fails if out appeared meanwhile (another
	// backup to the same file): --out is never overwritten.
	if err := os.Link(f.Name(), out); err != nil {
		return err
	}
	os.Remove(f.Name())
	var size int64
	if fi, err := os.Stat(out); err == nil {
		size = fi.Size()
	}
	logger.Info("seenapi: backup written", "out", out, "bytes", size, "filters", held.Filters, "no_history", held.NoHistory,
		"journal_records", held.JournalRecords, "from", shownURL(url))
	return skippedUsers(logger, out, held.Skipped)
}

// exitPartialBackup is the exit status of a backup written without the
// damaged users --skip-damaged left out: neither a success, which a
// script would take for a whole backup, nor a failure (1), which would
// have kept nothing.
const exitPartialBackup = 3

// partialBackup is the outcome of a backup written to out without the
// users skipped (--skip-damaged).
type partialBackup struct {
	out     string
	skipped int
}

func (p *partialBackup) Error() string {
	return fmt.Sprintf("%s leaves out %d damaged users", p.out, p.skipped)
}

// skippedUsers logs each user a backup left out, its filter damaged
// (--skip-damaged), and returns a *partialBackup if there are any.
func skippedUsers(logger *slog.Logger, out string, skipped []storage.SkippedUser) error {
	if len(skipped) == 0 {
		return nil
	}
	logSkipped(logger, "seenapi: the backup leaves out a user whose stored value is damaged", skipped)
	return &partialBackup{out: out, skipped: len(skipped)}
}

// logSkipped logs msg for each of the users a backup left out, every one:
// the operator repairs each by its name, and the log, in --log-format,
// quotes any user id as it is; the line that counts them comes after.
func logSkipped(logger *slog.Logger, msg string, skipped []storage.SkippedUser) {
	for _, u := range skipped {
		logger.Warn(msg, "ns", u.NS, "user", u.User, "reason", u.Reason)
	}
}

// damagedUserAdvice says that the stored value of user of ns could not be
// read (reason), so no backup can be taken, and how to repair it: a
// backup left without the user would restore as whole and lose it
// unseen, unless asked for (--skip-damaged), which names it. first is
// what must come first (starting the service), if any.
func damagedUserAdvice(ns, user, reason, first string) string {
	path := "/v1/namespaces/" + url.PathEscape(ns) + "/users/" + url.PathEscape(user)
	return fmt.Sprintf("the stored value of user %s of namespace %s is damaged (%s); a backup holds every user, "+
		"so none is taken while one cannot be read: %sreplace that user with an export of it kept earlier "+
		"(PUT %s/export?mode=replace), or erase it if none is kept (DELETE %s), then back up again; or back up without such users, naming them, with --skip-damaged",
		user, ns, reason, first, path, path)
}

// checkOut checks, before a backup is taken, that one can be written to
// out: its directory exists, and out does not (a backup never overwrites a
// file).
func checkOut(out string) error {
	if _, err := os.Lstat(out); err == nil {
		return fmt.Errorf("--out %s exists; a backup never overwrites a file", out)
	}
	dir := filepath.Dir(out)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("--out %s: its directory %s does not exist", out, dir)
	case err != nil:
		return fmt.Errorf("--out %s: %w", out, err)
	case !fi.IsDir():
		return fmt.Errorf("--out %s: %s is not a directory", out, dir)
	}
	return nil
}
