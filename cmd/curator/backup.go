package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/curatorproject/curator/client"
	"github.com/curatorproject/curator/consensus"
)

// backupProgressAfter is how long a backup runs before it shows progress:
// a small store is written before a line would be worth reading.
const backupProgressAfter = time.Second

func newClusterBackupCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "backup FILE",
		Short: "Write a snapshot of the cluster's etcd to FILE (admin only)",
		Long: `Stream a snapshot of every record in the cluster's etcd from the leader into
FILE (mode 0600; it holds the cluster's CA keys). The snapshot ends with its
SHA-256, which is checked before FILE is written in place, and which
'curator agent restore' checks again. FILE must not exist.

Restore on an empty data dir, once the cluster is lost:
  curator agent restore --data-dir DIR --listen IP:PORT --from FILE`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBackup(cmd, g, args[0])
		},
	}
}

func runBackup(cmd *cobra.Command, g *globalFlags, path string) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s exists: a backup never overwrites a file; give a new name", path)
	}
	part := path + ".part"
	f, err := os.OpenFile(part, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s exists: another backup to %s is running, or one was cut short (then delete it)", part, path)
		}
		return err
	}
	done := false
	defer func() {
		f.Close()
		if !done {
			os.Remove(part)
		}
	}()
	began := time.Now()
	last := began
	stderr := cmd.ErrOrStderr()
	shown := false
	progress := func(written, total int64) {
		now := time.Now()
		if now.Sub(began) < backupProgressAfter || now.Sub(last) < time.Second {
			return
		}
		last, shown = now, true
		if total > 0 {
			fmt.Fprintf(stderr, "backup: %s of about %s (%d%%)\n", mib(written), mib(total), min(100, written*100/total))
		} else {
			fmt.Fprintf(stderr, "backup: %s\n", mib(written))
		}
	}
	var size int64
	ctx, cancel := context.WithTimeout(cmd.Context(), client.BackupTimeout)
	defer cancel()
	err = g.dial(ctx, func(ctx context.Context, c *client.Client) error {
		var err error
		size, err = c.Backup(ctx, f, progress)
		return err
	})
	if err != nil {
		return apiError("backup", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := consensus.VerifySnapshot(part); err != nil {
		return fmt.Errorf("backup: the snapshot received is not whole (%w): try again", err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if err := os.Rename(part, path); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	done = true
	if shown {
		fmt.Fprintf(stderr, "backup: %s in %s\n", mib(size), time.Since(began).Round(100*time.Millisecond))
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Backup written to %s: %d bytes, sha256 %s.\nRestore it with: curator agent restore --data-dir DIR --listen IP:PORT --from %s\n",
		path, size, hex.EncodeToString(h.Sum(nil)), shellQuote(path))
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
