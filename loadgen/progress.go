package loadgen

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// startProgress redraws one status line every half second until stopped;
// where w is not a terminal it prints a plain line every five seconds.
func startProgress(w io.Writer, line func() string) func() {
	if w == nil {
		return func() {}
	}
	every, redraw := 500*time.Millisecond, true
	if !IsTerminal(w) {
		every, redraw = 5*time.Second, false
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				if redraw {
					fmt.Fprintf(w, "\r\033[K%s\n", line())
				} else {
					fmt.Fprintln(w, line())
				}
				return
			case <-t.C:
				if redraw {
					fmt.Fprintf(w, "\r\033[K%s", line())
				} else {
					fmt.Fprintln(w, line())
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// IsTerminal reports whether w is a terminal, where a line can be redrawn.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
