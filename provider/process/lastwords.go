//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/curatorproject/curator/provider"
)

// lastWordsBytes is how much of a log's end LastWords reads.
const lastWordsBytes = 8 << 10

// LastWords returns the last line instance id's agent wrote to its log,
// from its dir or, once Prune has taken that, from PrunedLogDir; "" when
// neither holds a log of it.
func (p *Provider) LastWords(_ context.Context, id string) (string, error) {
	if err := validID(id); err != nil {
		return "", fmt.Errorf("last words: %w", err)
	}
	for _, path := range []string{p.LogFile(id), filepath.Join(p.PrunedLogDir(), id+".log")} {
		out, err := readTail(path, lastWordsBytes)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("last words of %s: %w", id, err)
		}
		return provider.LastLine(out), nil
	}
	return "", nil
}

// readTail reads the last n bytes of the file at path.
func readTail(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(st.Size()-n, 0)
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}
