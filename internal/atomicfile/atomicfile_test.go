package atomicfile

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// Writers of one file at once, with a reader beside them: every read is one writer's whole
// content, and the file ends as one of them with the mode asked for. A shared temporary name
// (path + ".tmp") fails this: one writer truncates the file another is about to rename.
func TestConcurrentWritersAndReader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "machine.json")
	contents := make([][]byte, 8)
	for i := range contents {
		contents[i] = bytes.Repeat([]byte{byte('a' + i)}, 64<<10*(i+1))
	}
	if err := Write(path, contents[0], 0o600); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	bad := make(chan string, 1)
	go func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			b, err := os.ReadFile(path)
			if err == nil && !slices.ContainsFunc(contents, func(c []byte) bool { return bytes.Equal(b, c) }) {
				select {
				case bad <- string(b[:min(len(b), 16)]):
				default:
				}
			}
		}
	}()
	for i := range contents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if err := Write(path, contents[i], 0o600); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	select {
	case b := <-bad:
		t.Errorf("a reader saw a file no writer wrote (starting %q)", b)
	default:
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the file's mode: %v, %v", fi, err)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".machine.json.*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
