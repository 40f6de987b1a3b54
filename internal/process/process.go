// Package process runs the local stack's services (the Temporal dev server,
// pgsim, workers) as child processes for the commands that start a whole
// stack: the outage demo and the chaos run. It is their one process runner:
// each child has its own process group and a log file, is stopped politely
// and then killed, and can be started again with the same command line.
package process

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Process is one child process that can be killed and started again with the
// same command line, so a restarted service comes back on the same ports.
type Process struct {
	Name   string
	Path   string
	Args   []string
	Env    []string // added to this process's environment
	LogDir string   // the log file is LogDir/Name.log
	// FreshLog truncates the log file at each start; otherwise it is
	// appended to across restarts.
	FreshLog bool

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	log    *os.File
}

// LogPath is the file the process writes its output to.
func (p *Process) LogPath() string { return filepath.Join(p.LogDir, p.Name+".log") }

// Start starts the process; starting one that is running is an error.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("%s is already running", p.Name)
	}
	flags := os.O_CREATE | os.O_APPEND | os.O_WRONLY
	if p.FreshLog {
		flags = os.O_CREATE | os.O_TRUNC | os.O_WRONLY
	}
	f, err := os.OpenFile(p.LogPath(), flags, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Own process group: a Ctrl-C at the terminal reaches only the command
	// that started the stack, which then stops its children itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.cmd, p.exited, p.log = cmd, exited, f
	return nil
}

// Running reports whether the process was started and has not exited.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// CPUTime is the CPU time the process has used so far (user and system,
// from /proc), or 0 when it is not running or /proc cannot say.
func (p *Process) CPUTime() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return cpuTime(p.cmd.Process.Pid)
}

// Kill sends SIGKILL (no chance to clean up: the crash under test).
func (p *Process) Kill() error { return p.Stop(0) }

// Stop asks politely (SIGTERM) and kills the process group after grace;
// grace 0 kills at once. Stopping a process that is not running does nothing.
func (p *Process) Stop(grace time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil
	}
	pid := p.cmd.Process.Pid
	if grace > 0 {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(grace):
		}
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-p.exited
	p.log.Close()
	p.cmd = nil
	return nil
}

// WaitFor polls ready until it holds, the process dies or within passes.
func (p *Process) WaitFor(ctx context.Context, within time.Duration, what string, ready func(context.Context) bool) error {
	deadline := time.Now().Add(within)
	for !ready(ctx) {
		if !p.Running() {
			return fmt.Errorf("%s exited before %s (see %s)", p.Name, what, p.LogPath())
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s: no %s within %s (see %s)", p.Name, what, within, p.LogPath())
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// HTTPOK is a readiness probe: the URL answers 200.
func HTTPOK(url string) func(context.Context) bool {
	return func(ctx context.Context) bool {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

// FreeAddr returns a loopback address nobody listens on right now, for a
// child to be started on.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
