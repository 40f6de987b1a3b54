package process

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every Linux
// ABI Go runs on (reading sysconf would need cgo).
const clockTicks = 100

// cpuTime is a process's CPU time to the nanosecond where the kernel keeps
// per-thread schedstats: /proc's stat counts in 10 ms ticks, too coarse for
// a few orders' work. The threads' sum misses threads that exited, which
// stat still counts, so the larger of the two is taken.
func cpuTime(pid int) time.Duration {
	_, ticks := stat(pid)
	return finer(pid, ticks)
}

// finer is the process's CPU time given stat's ticks for it.
func finer(pid int, ticks time.Duration) time.Duration { return max(ticks, threadsRunTime(pid)) }

// threadsRunTime sums the time on CPU (schedstat's first field, in ns) of
// the process's live threads, or 0 when /proc cannot say.
func threadsRunTime(pid int) time.Duration {
	paths, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var total time.Duration
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited since the glob
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		total += time.Duration(ns)
	}
	return total
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
	return cpuTimeOf(func(_ int, name string) bool { return name == comm })
}

// PostgresDatabaseCPUTime is the CPU time used so far by the running
// PostgreSQL backends connected to database db: the backends' process
// titles ("postgres: CLUSTER: USER DB HOST ...", Debian's) name it.
func PostgresDatabaseCPUTime(db string) time.Duration {
	return cpuTimeOf(func(pid int, name string) bool { return name == "postgres" && backendOf(pid) == db })
}

// cpuTimeOf sums the CPU time of the running processes that match, by pid
// and command name.
func cpuTimeOf(match func(pid int, comm string) bool) time.Duration {
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
		if name, ticks := stat(pid); match(pid, name) {
			total += finer(pid, ticks)
		}
	}
	return total
}

// backendOf is the database a PostgreSQL backend's title names, or "".
func backendOf(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	// The title replaces argv: "postgres: 15/main: user db 127.0.0.1(5) idle",
	// or without the cluster's name on other builds.
	title, ok := strings.CutPrefix(strings.TrimRight(string(b), "\x00 "), "postgres: ")
	if !ok {
		return ""
	}
	f := strings.Fields(title)
	if len(f) > 0 && strings.HasSuffix(f[0], ":") {
		f = f[1:]
	}
	if len(f) < 3 || !strings.Contains(f[2], "(") && f[2] != "[local]" {
		return "" // an auxiliary process: checkpointer, walwriter, ...
	}
	return f[1]
}
