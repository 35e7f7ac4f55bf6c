package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/seenapi/seenapi/eviction"
	"github.com/seenapi/seenapi/storage"
)

// ctxWriter and ctxReader fail once ctx ends: a signal stops an offline
// backup or restore of a large store, which otherwise reads or writes on
// while SIGINT and SIGTERM are caught (see main).
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// openStore opens the store of --data-dir for an offline subcommand; it
// fails while the service holds the directory, saying so and, from
// inUseHint, what to do instead. minFreeBytes: as --min-free-bytes
// (negative: no check). With keepFormat a store of an older format is not
// upgraded (see storage.Options.KeepFormat).
func openStore(o *options, minFreeBytes int64, keepFormat bool, logger *slog.Logger, inUseHint func(url string) string) (*storage.Store, error) {
	if _, err := os.Stat(o.dataDir); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("--data-dir %s does not exist; give the directory the service serves (its --data-dir, ./data by default)", o.dataDir)
	} else if err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	store, err := storage.Open(storage.DefaultOptions(o.dataDir).WithMinFreeBytes(minFreeBytes).
		WithKeepFormat(keepFormat).WithLogger(logger))
	switch {
	case errors.Is(err, storage.ErrInUse):
		return nil, fmt.Errorf("--data-dir %s is in use, probably by a seenapi serving it%s: %s (%w)", o.dataDir, servingAt(o.dataDir), inUseHint(servingURL(o.dataDir)), err)
	case errors.Is(err, storage.ErrNoStore):
		return nil, fmt.Errorf("--data-dir %s holds no seenapi store, so nothing was backed up; give the directory the service serves (its --data-dir, ./data by default)", o.dataDir)
	case err != nil:
		return nil, err
	}
	return store, nil
}

// backup writes a backup of --data-dir to --out, until ctx ends (SIGINT,
// SIGTERM), which leaves no --out.
func backup(ctx context.Context, o *options, logger *slog.Logger) (err error) {
	if err := checkOut(o.out); err != nil {
		return err
	}
	// Only reads: no free-space minimum, and the directory stays in its
	// format, so that the build that wrote it can still open it (a backup
	// taken before going back to it, or before an upgrade).
	store, err := openStore(o, -1, true, logger, func(url string) string {
		return "while it runs, back it up with an admin key through its API (GET /v1/backup): seenapi backup --url " +
			cmp.Or(url, "URL") + " --out " + cmp.Or(o.out, "FILE") + "; or stop it first"
	})
	if err != nil {
		return err
	}
	defer func() {
		// Not joined when it closes well: a *partialBackup alone is no
		// failure (see run).
		if cerr := store.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	// The calls a crash left unwritten go into the backup as they are:
	// the service's next start still finds the crash (and says so).
	store.KeepCrashMark()
	f, err := os.OpenFile(o.out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	// Read back as it is written, so the log says what it holds.
	pr, pw := io.Pipe()
	verified := make(chan error, 1)
	var held storage.BackupContents
	go func() {
		var err error
		held, err = storage.VerifyBackup(pr, eviction.NoHistory())
		pr.CloseWithError(err) // a failed read must not leave Backup blocked
		verified <- err
	}()
	if o.skipDamaged {
		// The users left out are named by the stream (held.Skipped).
		_, err = store.BackupSkippingDamaged(ctxWriter{ctx, io.MultiWriter(w, pw)})
	} else {
		err = store.Backup(ctxWriter{ctx, io.MultiWriter(w, pw)})
	}
	pw.CloseWithError(err)
	if err = errors.Join(err, <-verified); err != nil {
		f.Close()
		os.Remove(o.out)
		if ctx.Err() != nil {
			return fmt.Errorf("backup interrupted; %s was not kept (%w)", o.out, ctx.Err())
		}
		if ue := (*storage.UserError)(nil); errors.As(err, &ue) && errors.Is(err, storage.ErrCorrupt) {
			return fmt.Errorf("%s; %s was not kept", damagedUserAdvice(ue.NS, ue.User,
				strings.TrimPrefix(ue.Err.Error(), "storage: "), "start the service and "), o.out)
		}
		return err
	}
	if err := errors.Join(w.Flush(), f.Sync(), f.Close()); err != nil {
		os.Remove(o.out)
		return err
	}
	var size int64
	if fi, err := os.Stat(o.out); err == nil {
		size = fi.Size()
	}
	logger.Info("seenapi: backup written", "out", o.out, "bytes", size, "filters", held.Filters, "no_history", held.NoHistory,
		"journal_records", held.JournalRecords, "data_dir", o.dataDir)
	return skippedUsers(logger, o.out, held.Skipped)
}

// restore restores --in into --data-dir (created if missing), until ctx
// ends (SIGINT, SIGTERM): before the check of the backup is through,
// nothing is written; after, the users restored so far stay. A
// --data-dir that holds users already is refused unless --merge merges
// the backup into them or --discard-existing discards them first: a
// restore otherwise mixes them with the backup's, and the calls a crash
// left unwritten there would be replayed onto the users it restores.
func restore(ctx context.Context, o *options, logger *slog.Logger) (err error) {
	f, err := os.Open(o.in)
	if err != nil {
		return fmt.Errorf("--in: %w", err) // the error names only the path
	}
	defer f.Close()
	// A directory opens, and its read's error would be taken for a file
	// without a backup's header.
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return fmt.Errorf("--in %s is a directory; give the backup file (backup's --out)", o.in)
	}
	// The whole file is checked before anything is written: a restore is
	// not atomic, and a damaged backup would otherwise leave part of itself
	// in --data-dir.
	held, err := storage.VerifyBackup(bufio.NewReaderSize(ctxReader{ctx, f}, 1<<20), eviction.NoHistory())
	if ctx.Err() != nil {
		return fmt.Errorf("restore interrupted while checking %s; nothing was restored (%w)", o.in, ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("%s: %w; nothing was restored", o.in, err)
	}
	// Said before the restore, which may be stopped or fail: these users
	// will not be in --data-dir as they were.
	logSkipped(logger, "seenapi: the backup leaves out a user whose stored value was damaged when it was taken "+
		"(--skip-damaged): its calls not yet written back then are restored alone", held.Skipped)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := os.MkdirAll(o.dataDir, 0o755); err != nil {
		return fmt.Errorf("--data-dir: %w; nothing was restored", err) // the error names only the path
	}
	store, err := openStore(o, o.storeMinFreeBytes(), false, logger, func(string) string { return "stop it before restoring into its data directory" })
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	// The calls a crash left unwritten stay for the service's next start
	// to find (and say so), unless they are discarded below.
	if !o.discardExisting {
		store.KeepCrashMark()
	}
	nss, err := store.Namespaces()
	if err != nil {
		return err
	}
	switch {
	case o.discardExisting:
		if err := discardData(ctx, store, nss, logger); err != nil {
			store.KeepCrashMark() // what is left of the crash's calls
			return err
		}
	case len(nss) > 0 && !o.merge:
		crash := ""
		if store.OpenedAfterCrash() {
			crash = ", with the calls a crash left not yet written back, which the next start would replay onto the users restored"
		}
		return fmt.Errorf("--data-dir %s holds users already (namespaces %s)%s; nothing was restored: give --discard-existing to discard them first, "+
			"so that the directory holds the backup's data alone, or --merge to merge the backup into them", o.dataDir, shortList(nss), crash)
	}
	var (
		merge storage.MergeFunc
		fold  storage.FoldFunc
	)
	if o.merge {
		// A user's calls since its last write-back (a crash) are folded
		// into its stored filter before the merge: replayed onto the
		// union instead, they could leave an item they found seen unseen.
		merge, fold = eviction.MergeRestored, eviction.FoldJournal(store.MaxValueBytes())
	}
	if err := store.Restore(bufio.NewReaderSize(ctxReader{ctx, f}, 1<<20), merge, fold); err != nil {
		if ctx.Err() != nil {
			// Each user is restored whole or not at all, and restoring a
			// user again gives the same filter.
			return fmt.Errorf("restore interrupted: --data-dir %s holds part of the backup; restore it again with %s to finish (%w)",
				o.dataDir, map[bool]string{false: "--discard-existing", true: "--merge"}[o.merge], ctx.Err())
		}
		return err
	}
	logger.Info("seenapi: backup restored", "in", o.in, "filters", held.Filters, "no_history", held.NoHistory, "journal_records", held.JournalRecords,
		"skipped_users", len(held.Skipped), "data_dir", o.dataDir, "merged", o.merge)
	return nil
}

// discardData erases every user of store, whose namespaces are nss, and
// the answers kept for retries beside it, so that a restore into its
// directory leaves the backup's data alone there. Each namespace goes as
// a purge takes it (storage.Store.PurgeNamespace): the stored filters,
// and erase records voiding their journal records, so that no start
// replays the calls a crash left onto the users restored. The answers
// kept for Idempotency-Key retries would give a retry of a call whose
// items are discarded its first answer again, recording nothing.
func discardData(ctx context.Context, store *storage.Store, nss []string, logger *slog.Logger) error {
	erased := 0
	for _, ns := range nss {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("restore interrupted while discarding --data-dir's users, some of them discarded; nothing was restored: run it again (%w)", err)
		}
		n, err := store.PurgeNamespace(ns)
		erased += n
		if err != nil {
			return fmt.Errorf("%w; some of --data-dir's users may be discarded, nothing was restored: run it again", err)
		}
	}
	dir := store.Dir()
	if err := errors.Join(os.RemoveAll(filepath.Join(dir, keptAnswersFile)), os.RemoveAll(filepath.Join(dir, answersLogDir))); err != nil {
		return fmt.Errorf("%w; nothing was restored: run it again", err)
	}
	logger.Info("seenapi: discarded the data directory's users before restoring", "users_erased", erased,
		"namespaces", len(nss), "crashed", store.OpenedAfterCrash(), "data_dir", dir)
	return nil
}

// shortList names the first few of names, and how many more there are.
func shortList(names []string) string {
	const shown = 5
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}
