package curator

import (
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"

	"github.com/curatorproject/curator/curator/store"
	pb "github.com/curatorproject/curator/proto"
)

// backupChunk is how much of the snapshot one message carries.
const backupChunk = 1 << 20

// Backup streams a snapshot of the leader's etcd member, as etcd makes it
// (Maintenance.Snapshot): a consistent copy of every key, then the
// SHA-256 of it, which `agent restore` checks. The first chunk carries a
// size hint (the database's size) for the client's progress line.
func (m *managementAPI) Backup(_ *pb.BackupRequest, stream grpc.ServerStreamingServer[pb.BackupChunk]) error {
	if _, err := m.s.leaderFor(); err != nil {
		return err
	}
	ctx := stream.Context()
	cli := m.s.cfg.Etcd
	var hint int64
	if eps := cli.Endpoints(); len(eps) > 0 {
		if st, err := cli.Status(ctx, eps[0]); err == nil {
			hint = st.DbSize + 32
		}
	}
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("%w: %v", store.ErrNoSnapshot, err)
	}
	defer rc.Close()
	buf := make([]byte, backupChunk)
	for {
		n, err := io.ReadFull(rc, buf)
		if n > 0 {
			if err := stream.Send(&pb.BackupChunk{Data: buf[:n], SizeHint: hint}); err != nil {
				return err
			}
			hint = 0
		}
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return nil
		case err != nil:
			return fmt.Errorf("%w: %v", store.ErrNoSnapshot, err)
		}
	}
}
