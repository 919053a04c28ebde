package main

// term.go: output for a terminal: progress lines and shell-quoted commands.

import (
	"fmt"
	"strings"
	"time"
)

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@=,+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// progress shows a line that refreshes while long work runs, when stdout is
// a terminal (never in pipes, files and tests). The returned func erases it.
func (a *app) progress(line func() string) (stop func()) {
	if !a.stdoutIsTerminal {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(a.stdout, "\r\033[K")
				return
			case <-tick.C:
				fmt.Fprint(a.stdout, "\r\033[K"+line())
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}
