package exitcode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"syscall"

	"github.com/payguard/payguard/internal/buildinfo"
)

// Main is every payguard main: it runs run until it returns or SIGINT or
// SIGTERM ends its context, reports what it returned, and exits with its code.
func Main(name string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	os.Exit(Report(os.Stdout, os.Stderr, name, err))
}

// Report writes what err says, the build for ErrVersion to stdout, and an
// error as one line "name: error" (a JSON object under JSON) to stderr,
// and returns the exit code.
func Report(stdout, stderr io.Writer, name string, err error) int {
	code := Code(err)
	switch {
	case errors.Is(err, ErrVersion):
		fmt.Fprintf(stdout, "%s %s\n", name, buildinfo.Read())
		return code
	case code == OK || errors.As(err, new(*reported)):
		return code
	}
	msg := OneLine(err.Error())
	var j *jsonRequested
	if errors.As(err, &j) {
		line, _ := json.Marshal(struct {
			Error string `json:"error"`
			Code  int    `json:"code"`
			Kind  string `json:"kind"`
		}{msg, code, Kind(code)})
		fmt.Fprintf(stderr, "%s\n", line)
		return code
	}
	fmt.Fprintf(stderr, "%s: %s\n", name, msg)
	return code
}

// jsonRequested marks an error of a command run with --json.
type jsonRequested struct{ err error }

func (j *jsonRequested) Error() string { return j.err.Error() }
func (j *jsonRequested) Unwrap() error { return j.err }

// JSON marks err, when asked (a command's --json), to be reported as a
// JSON object {"error","code","kind"}; nil stays nil.
func JSON(err error, asked bool) error {
	if err == nil || !asked {
		return err
	}
	return &jsonRequested{err}
}

// reported marks an error the program has told already (chaos's
// violations, printed in its report): Report adds no line, only the code.
type reported struct{ err error }

func (r *reported) Error() string { return r.err.Error() }
func (r *reported) Unwrap() error { return r.err }

// Reported wraps err, its code kept, as already told.
func Reported(err error) error {
	if err == nil {
		return nil
	}
	return &reported{err}
}

var lineBreaks = regexp.MustCompile(`\s*\n\s*`)

// OneLine folds a message onto one line: pgx, for one, breaks a failed
// connection's attempts over several.
func OneLine(msg string) string { return lineBreaks.ReplaceAllString(msg, " ") }
