// Package process runs the local stack's services (the Temporal dev server,
// pgsim, workers) as child processes for the commands that start a whole
// stack: the outage demo and the chaos run. It is their one process runner:
// each child has its own process group and a log file, is stopped politely
// and then killed, and can be started again with the same command line.
package process

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every Linux
// ABI Go runs on (reading sysconf would need cgo).
const clockTicks = 100

func cpuTime(pid int) time.Duration {
	_, d := stat(pid)
	return d
}

// stat reads a process's command name and CPU time from /proc.
func stat(pid int) (string, time.Duration) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0
	}
	// The command name (field 2) may hold spaces: count from the ')' after it.
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return "", 0
	}
	fields := strings.Fields(string(b[end+1:]))
	if len(fields) < 13 {
		return "", 0
	}
	user, _ := strconv.ParseInt(fields[11], 10, 64) // field 14, utime
	sys, _ := strconv.ParseInt(fields[12], 10, 64)  // field 15, stime
	return string(b[open+1 : end]), time.Duration(user+sys) * time.Second / clockTicks
}

// SelfCPUTime is the calling process's CPU time so far (user and system,
// from getrusage).
func SelfCPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CommandCPUTime is the CPU time used so far by every running process
// named comm (its /proc command name): PostgreSQL's backends, for one,
// which no Process of ours starts. A process that exited is not counted.
func CommandCPUTime(comm string) time.Duration {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var total time.Duration
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if name, d := stat(pid); name == comm {
			total += d
		}
	}
	return total
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
