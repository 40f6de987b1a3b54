// Package deployment is payguard's Worker Deployment (docs/rollout.md): the
// deployment's name, the build id a binary runs as, the rules both follow,
// and the routing between builds: which build takes new runs (current.go)
// and whether an old build's pinned runs have drained (status.go).
//
// Every payguard worker is a versioned worker: it polls as
// DeploymentName:BuildID, and the server sends a run's tasks only to the
// workers of the build it is pinned to. A change to workflow code ships as a
// new build id, so a run never replays on code it did not start on.
package deployment

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime/debug"
	"sync"

	"go.temporal.io/sdk/worker"
)

// DefaultName is the deployment every payguard worker belongs to unless
// told otherwise (--deployment-name).
const DefaultName = "payguard"

// The environment variables behind the worker's --deployment-name,
// --build-id and --set-current.
const (
	NameEnv       = "PAYGUARD_DEPLOYMENT_NAME"
	BuildIDEnv    = "PAYGUARD_BUILD_ID"
	SetCurrentEnv = "PAYGUARD_SET_CURRENT"
)

// Name is --deployment-name's default: NameEnv, else DefaultName.
func Name(getenv func(string) string) string {
	if v := getenv(NameEnv); v != "" {
		return v
	}
	return DefaultName
}

// revisionLen is how much of the commit hash a build id keeps: as many
// digits as `git log --abbrev=12`, unambiguous in any repository this size.
const revisionLen = 12

// DefaultBuildID names the code this binary runs: its commit, when Go
// stamped one into it (`go build` in a git checkout). A binary built from a
// checkout with uncommitted changes gets +dirty and a digest of its own
// bytes, because two such builds of one commit hold different code and must
// not share a build id: the server would hand one's pinned runs to the
// other. A binary without a stamp (test binaries, `go run`, -buildvcs=false,
// a Docker build without .git) is named by its digest alone, build-<hex>,
// so rebuilding the same source gives the same id and any change a new one.
func DefaultBuildID() string { return defaultBuildID() }

var defaultBuildID = sync.OnceValue(func() string {
	var revision string
	var modified bool
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	return buildIDFrom(revision, modified, executableDigest)
})

// buildIDFrom is DefaultBuildID's rule, digest read only when it is needed.
func buildIDFrom(revision string, modified bool, digest func() string) string {
	if len(revision) > revisionLen {
		revision = revision[:revisionLen]
	}
	switch {
	case revision == "":
		return "build-" + digest()
	case modified:
		return revision + "+dirty-" + digest()
	}
	return revision
}

// executableDigest is the first 12 hex digits of the SHA-256 of this
// binary, or "unknown" when it cannot be read (then every such build
// shares the id, which the worker's start log shows).
func executableDigest() string {
	path, err := os.Executable()
	if err != nil {
		return "unknown"
	}
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "unknown"
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// The accepted forms. The server refuses '.' and ':' in a deployment name
// (its version strings are name:build) and a leading "__" in either; these
// sets are narrower still, so a name or id needs no quoting in a visibility
// query, a shell or a URL.
var (
	namePattern    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
	buildIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$`)
)

// CheckName refuses a deployment name the server or a query could not take.
func CheckName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("deployment name %q must be 1-64 characters of A-Z a-z 0-9 _ -, starting with a letter or digit", name)
	}
	return nil
}

// CheckBuildID refuses a build id the server or a query could not take.
func CheckBuildID(id string) error {
	if !buildIDPattern.MatchString(id) {
		return fmt.Errorf("build id %q must be 1-128 characters of A-Z a-z 0-9 . _ + -, starting with a letter or digit", id)
	}
	return nil
}

// Version is the worker deployment version of build id in deployment name.
func Version(name, buildID string) worker.WorkerDeploymentVersion {
	return worker.WorkerDeploymentVersion{DeploymentName: name, BuildID: buildID}
}

// VersionString is a version as the server writes it in the
// TemporalWorkerDeploymentVersion search attribute and the temporal CLI
// prints it: name:build.
func VersionString(v worker.WorkerDeploymentVersion) string {
	return v.DeploymentName + ":" + v.BuildID
}

// RunningPinnedQuery is the visibility query for the open runs pinned to a
// version: the runs its workers must stay up for.
func RunningPinnedQuery(v worker.WorkerDeploymentVersion) string {
	return fmt.Sprintf("TemporalWorkerDeploymentVersion = '%s' AND TemporalWorkflowVersioningBehavior = 'Pinned' AND ExecutionStatus = 'Running'",
		VersionString(v))
}
