// Package atomicfile replaces a file whole: a reader, or the machine after
// a crash, sees the old file or the new one, never half of one. Keys,
// certificates and the state files of nodes, the process provider and the
// CLI are written through it.
//
// It is renameio's pending file with two choices made once, so that no
// caller can forget them:
//   - the temporary file lies beside the file it replaces (renameio would
//     otherwise try the system's temporary folder first), so the rename
//     never crosses a file system and a key never passes through a folder
//     that others share;
//   - the mode is exactly the one asked for, whatever the umask, also when
//     an older file had another.
//
// The data is synced before the rename, so a crash cannot leave an empty
// file behind the new name.
package atomicfile

import (
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// Write replaces the file at path with data, with mode mode.
func Write(path string, data []byte, mode os.FileMode) error {
	f, err := renameio.NewPendingFile(path,
		renameio.WithTempDir(filepath.Dir(path)),
		renameio.WithStaticPermissions(mode))
	if err != nil {
		return err
	}
	defer f.Cleanup() // a no-op once replaced
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.CloseAtomicallyReplace()
}
