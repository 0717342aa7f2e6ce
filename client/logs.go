package client

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/curatorproject/curator/proto"
)

// LogsFollowTimeout bounds one attempt of NodeLogs with Follow: as long
// as the caller follows.
const LogsFollowTimeout = 365 * 24 * time.Hour

// NodeLogs streams a node agent's log lines, as req asks, to fn, in
// order. With Follow it goes on until ctx ends; a manager or leader that
// goes meanwhile is left for another, which sends the lines after the
// last one fn had (none twice).
func (c *Client) NodeLogs(ctx context.Context, req *pb.NodeLogsRequest, fn func(lines []*pb.LogLine) error) error {
	timeout := c.o.attemptTimeout
	if req.Follow {
		timeout = LogsFollowTimeout
	}
	var last time.Time
	seen := false
	err := c.manage(ctx, timeout, func(ctx context.Context, m pb.ManagementClient) error {
		r := proto.CloneOf(req)
		if seen {
			r.Since, r.Tail = timestamppb.New(last), 0
		}
		stream, err := m.NodeLogs(ctx, r)
		if err != nil {
			return err
		}
		for {
			resp, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			lines := resp.Lines
			if seen {
				// Sent again after a retry: only what is after the last.
				lines = lines[:0:0]
				for _, l := range resp.Lines {
					if l.GetTime().AsTime().After(last) {
						lines = append(lines, l)
					}
				}
			}
			if len(lines) == 0 {
				continue
			}
			if err := fn(lines); err != nil {
				return callerError{err}
			}
			last, seen = lines[len(lines)-1].GetTime().AsTime(), true
		}
	})
	var ce callerError
	if errors.As(err, &ce) {
		return ce.err
	}
	return err
}
