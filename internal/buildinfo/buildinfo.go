// Package buildinfo says which build a payguard binary is: what --version
// prints and the payguard_build_info metric carries, so that an operator
// under Worker Versioning can see which build answers.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
)

// Version is the release, set at link time
// (-ldflags "-X github.com/payguard/payguard/internal/buildinfo.Version=v1.2.3");
// unset, the module's version, "(devel)" for a build from a checkout.
var Version = ""

// Info is one binary's build.
type Info struct {
	Version  string
	Revision string // the commit, "" when the build was not stamped
	Modified bool   // built with uncommitted changes
	Go       string
}

// Read returns this binary's build.
var Read = sync.OnceValue(func() Info {
	info := Info{Version: Version, Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if info.Version == "" {
			info.Version = "unknown"
		}
		return info
	}
	if info.Version == "" {
		info.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
})

// String is the line --version prints: "name version (revision[+dirty], go)".
func (i Info) String() string {
	rev := i.Revision
	if rev == "" {
		rev = "unstamped"
	}
	if i.Modified {
		rev += "+dirty"
	}
	return fmt.Sprintf("%s (%s, %s)", i.Version, rev, i.Go)
}
