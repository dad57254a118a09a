package guest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
)

// Runner runs commands on a remote shell: an SSH or a WinRM connection.
type Runner interface {
	Run(ctx context.Context, c Command, stdout, stderr io.Writer) (int, error)
}

// Shell is a Transport over a Runner that moves files through the standard streams of the
// guest's commands, in base64, and checks every upload's sha256 on the guest.
type Shell struct {
	Runner
	Lang Lang
}

var _ Transport = Shell{}

func (s Shell) Upload(ctx context.Context, dst string, src io.Reader, _ int64) error {
	return s.Write(ctx, dst, src, false)
}

// chunk is how many bytes go in one line of base64: each line decodes on its own.
const chunk = 48 << 10

// Write writes src to a node path; a secret is readable only by the node's administrators.
func (s Shell) Write(ctx context.Context, dst string, src io.Reader, secret bool) error {
	pr, pw := io.Pipe()
	h := sha256.New()
	go func() {
		w := bufio.NewWriter(pw)
		buf := make([]byte, chunk)
		line := make([]byte, base64.StdEncoding.EncodedLen(chunk)+1)
		for {
			n, err := io.ReadFull(src, buf)
			if n > 0 {
				h.Write(buf[:n])
				base64.StdEncoding.Encode(line, buf[:n])
				enc := base64.StdEncoding.EncodedLen(n)
				line[enc] = '\n'
				if _, werr := w.Write(line[:enc+1]); werr != nil {
					pw.CloseWithError(werr)
					return
				}
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				pw.CloseWithError(w.Flush())
				return
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	got, err := Output(ctx, s, Command{What: "write " + dst, Line: s.Lang.Receive(dst, secret), Elevated: true, Stdin: pr})
	_ = pr.Close()
	if err != nil {
		return err
	}
	lines := strings.Fields(got)
	want := hex.EncodeToString(h.Sum(nil))
	if len(lines) == 0 || lines[len(lines)-1] != want {
		return fmt.Errorf("write %s: the guest wrote a file whose sha256 is not %s (it printed %q)", dst, want, got)
	}
	return nil
}

func (s Shell) Download(ctx context.Context, src string, dst io.Writer) error {
	out, err := Output(ctx, s, Command{What: "read " + src, Line: s.Lang.Send(src)})
	if err != nil {
		return err
	}
	b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(out), ""))
	if err != nil {
		return fmt.Errorf("read %s: the guest sent no base64: %w", src, err)
	}
	_, err = dst.Write(b)
	return err
}
