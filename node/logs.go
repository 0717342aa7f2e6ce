package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/curatorproject/curator/proto"
	"github.com/curatorproject/curator/supervisor"
)

// An agent keeps its last log lines in memory (LogRing), so that an
// operator reads them through the managers (`curator logs NODE`) with
// no shell on the machine: the leader pushes a LogsRequest on the node's
// session stream, and the node answers with SendLogs. The ring is
// bounded, in lines and in each line's length; what a restart loses is
// still where the agent's stderr goes (the journal, or the process
// provider's log file).

// Bounds of the log ring.
const (
	DefaultLogLines = 10000
	// MaxLogLine cuts a longer line (its end is dropped, and said so).
	MaxLogLine = 8 << 10
	// logChunkLines bounds the lines of one LogChunk.
	logChunkLines = 500
)

// logLine is one line of the ring: its number (1 for the first line
// ever written), when it was written, and its text.
type logLine struct {
	seq  uint64
	time time.Time
	text string
}

// LogRing keeps the last lines written to it (an io.Writer: the agent's
// logger writes there beside stderr).
type LogRing struct {
	mu      sync.Mutex
	lines   []logLine // a ring of cap max, oldest at start
	start   int
	next    uint64 // the number of the next line
	partial []byte
	// grew is closed, and made anew, at each line written.
	grew chan struct{}
	max  int
	now  func() time.Time
}

// NewLogRing keeps the last max lines (DefaultLogLines if 0).
func NewLogRing(max int) *LogRing {
	if max <= 0 {
		max = DefaultLogLines
	}
	return &LogRing{max: max, next: 1, grew: make(chan struct{}), now: time.Now}
}

// Write takes whole lines; a line's end that has not come yet waits for
// the next write.
func (r *LogRing) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	added := false
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			r.partial = append(r.partial, p[:min(len(p), max(0, MaxLogLine+1-len(r.partial)))]...)
			break
		}
		line := append(r.partial, p[:i]...)
		r.partial = nil
		p = p[i+1:]
		r.add(string(line))
		added = true
	}
	if added {
		close(r.grew)
		r.grew = make(chan struct{})
	}
	return n, nil
}

// add appends a line, the oldest going once the ring is full. Call with
// mu.
func (r *LogRing) add(text string) {
	if len(text) > MaxLogLine {
		text = fmt.Sprintf("%s... (%d bytes cut)", text[:MaxLogLine], len(text)-MaxLogLine)
	}
	l := logLine{seq: r.next, time: r.now(), text: text}
	r.next++
	if len(r.lines) < r.max {
		r.lines = append(r.lines, l)
		return
	}
	r.lines[r.start] = l
	r.start = (r.start + 1) % r.max
}

// after returns the lines kept numbered after seq and logged at or after
// since (zero: any time), at most tail of the last (0: all), the number
// to read after next time, and a channel closed at the next line.
func (r *LogRing) after(seq uint64, since time.Time, tail int) ([]logLine, uint64, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []logLine
	for i := range r.lines {
		l := r.lines[(r.start+i)%len(r.lines)]
		if l.seq > seq && !l.time.Before(since) {
			out = append(out, l)
		}
	}
	if tail > 0 && len(out) > tail {
		out = out[len(out)-tail:]
	}
	return out, r.next - 1, r.grew
}

// Logs are the agent's log lines that req asks for, in chunks, to send:
// the lines kept, then (req.Follow) each new line until ctx ends or send
// fails.
func (r *LogRing) Logs(ctx context.Context, req *pb.LogsRequest, send func([]*pb.LogLine) error) error {
	var since time.Time
	if req.GetSince() != nil {
		since = req.GetSince().AsTime()
	}
	lines, seq, grew := r.after(0, since, int(req.GetTail()))
	for {
		for len(lines) > 0 {
			n := min(len(lines), logChunkLines)
			chunk := make([]*pb.LogLine, 0, n)
			for _, l := range lines[:n] {
				chunk = append(chunk, &pb.LogLine{Time: timestamppb.New(l.time), Text: l.text})
			}
			if err := send(chunk); err != nil {
				return err
			}
			lines = lines[n:]
		}
		if !req.GetFollow() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-grew:
		}
		lines, seq, grew = r.after(seq, since, 0)
	}
}

// runLogs answers the requests for the node's logs that its session
// stream carries, each with its own SendLogs call (to any manager:
// followers forward it to the leader), until ctx ends; it waits for the
// calls it started.
func (a *Agent) runLogs(ctx context.Context) error {
	supervisor.Signal(ctx, supervisor.Healthy)
	var sends sync.WaitGroup
	defer sends.Wait()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case req := <-a.logRequests:
			sends.Go(func() {
				if err := a.sendLogs(ctx, req); err != nil && ctx.Err() == nil {
					supervisor.Logger(ctx).Debug("could not send the node's logs", zap.String("request", req.GetId()), zap.Error(err))
				}
			})
		}
	}
}

// sendLogs answers one request for the node's logs: the lines it asks
// for, then (follow) each new one, until the leader ends the call.
func (a *Agent) sendLogs(ctx context.Context, req *pb.LogsRequest) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pb.NewCuratorClient(a.conn).SendLogs(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&pb.LogChunk{RequestId: req.GetId()}); err != nil {
		return err
	}
	// The leader ends the call when its caller goes: a follow stops then.
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				ended <- err
				cancel()
				return
			}
		}
	}()
	ring := a.cfg.Logs
	if ring == nil {
		ring = NewLogRing(1)
		_, _ = ring.Write([]byte("this agent keeps no log lines to send (it was started without a log ring)\n"))
	}
	err = ring.Logs(ctx, req, func(lines []*pb.LogLine) error {
		return stream.Send(&pb.LogChunk{Lines: lines})
	})
	if err == nil {
		err = stream.CloseSend()
	}
	if rerr := <-ended; err == nil && !errors.Is(rerr, io.EOF) {
		err = rerr
	}
	return err
}
