package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	pb "github.com/curatorproject/curator/proto"
)

// BackupTimeout bounds one attempt of Backup: a store of several GiB
// streams within it on any network the cluster itself works on.
const BackupTimeout = 30 * time.Minute

// BackupFile is where Backup writes: a file it may start again from the
// beginning when a manager fails in the middle and another one answers.
type BackupFile interface {
	io.Writer
	io.Seeker
	Truncate(size int64) error
}

// Backup streams a snapshot of the cluster's etcd from the leader into f
// (etcd's format: the database, then its SHA-256) and returns its size.
// progress, if not nil, is called after each chunk with the bytes written
// and about how many the whole holds (0 if unknown).
func (c *Client) Backup(ctx context.Context, f BackupFile, progress func(written, total int64)) (int64, error) {
	var written int64
	err := c.manage(ctx, BackupTimeout, func(ctx context.Context, m pb.ManagementClient) error {
		written = 0
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		if err := f.Truncate(0); err != nil {
			return err
		}
		stream, err := m.Backup(ctx, &pb.BackupRequest{})
		if err != nil {
			return err
		}
		var total int64
		for {
			chunk, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if chunk.SizeHint > 0 {
				total = chunk.SizeHint
			}
			n, err := f.Write(chunk.Data)
			written += int64(n)
			if err != nil {
				return fmt.Errorf("write the backup: %w", err)
			}
			if progress != nil {
				progress(written, total)
			}
		}
	})
	return written, err
}
