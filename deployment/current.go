package deployment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// The --set-current policies: what a worker does about the deployment's
// current version once its pollers have registered its own build.
const (
	// SetCurrentAuto makes this build current only while the deployment
	// has none (a fresh server, or one whose runs were all unversioned):
	// a single build starts serving on its own, and a second build started
	// beside a current one waits for `starter deployment set-current`.
	SetCurrentAuto = "auto"
	// SetCurrentAlways makes this build current at every start: for a
	// stack that only ever runs one build at a time (make worker, compose),
	// where the previous build is gone once the new one starts.
	SetCurrentAlways = "always"
	// SetCurrentNever leaves the routing to the operator.
	SetCurrentNever = "never"
)

// CheckSetCurrent refuses an unknown --set-current policy.
func CheckSetCurrent(policy string) error {
	switch policy {
	case SetCurrentAuto, SetCurrentAlways, SetCurrentNever:
		return nil
	}
	return fmt.Errorf("--set-current must be %s, %s or %s, got %q", SetCurrentAuto, SetCurrentAlways, SetCurrentNever, policy)
}

// RegisterTimeout bounds the wait for the server to know a build: its
// workers register it on their first polls, which takes well under a
// second on a healthy server.
const RegisterTimeout = time.Minute

// retryEvery is how often a registration or a routing change is tried
// again while the server is not ready for it.
const retryEvery = 200 * time.Millisecond

// Outcome is what Apply did about the current version.
type Outcome struct {
	// Made is true when this call made the build current.
	Made bool
	// Current is the deployment's current version afterwards (nil: none).
	Current *worker.WorkerDeploymentVersion
}

// Apply waits until the server has registered version v on taskQueue (its
// workflow and activity queues both, so the whole build takes the runs it
// is given), then applies policy. It gives up after RegisterTimeout or when
// ctx ends, with the last answer the server gave.
func Apply(ctx context.Context, cl client.Client, v worker.WorkerDeploymentVersion, taskQueue, policy string, log *slog.Logger) (Outcome, error) {
	if err := CheckSetCurrent(policy); err != nil {
		return Outcome{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, RegisterTimeout)
	defer cancel()
	h := cl.WorkerDeploymentClient().GetHandle(v.DeploymentName)
	if err := waitRegistered(ctx, cl, h, v, taskQueue, log); err != nil {
		return Outcome{}, fmt.Errorf("build %s was not registered in deployment %s: %w", v.BuildID, v.DeploymentName, err)
	}
	for {
		out, err := applyOnce(ctx, h, v, policy)
		if err == nil {
			return out, nil
		}
		if !retryable(err) {
			return Outcome{}, fmt.Errorf("make build %s current in deployment %s: %w", v.BuildID, v.DeploymentName, err)
		}
		log.Debug("deployment routing not changed yet, trying again", "deployment_name", v.DeploymentName, "build_id", v.BuildID, "error", err.Error())
		if err := pause(ctx, err); err != nil {
			return Outcome{}, fmt.Errorf("make build %s current in deployment %s: %w", v.BuildID, v.DeploymentName, err)
		}
	}
}

// applyOnce reads the routing and changes it if policy says so. The
// conflict token makes two workers that read "no current version" at once
// safe: the second's change fails, and its next read sees the first's.
func applyOnce(ctx context.Context, h client.WorkerDeploymentHandle, v worker.WorkerDeploymentVersion, policy string) (Outcome, error) {
	desc, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	if err != nil {
		return Outcome{}, err
	}
	current := desc.Info.RoutingConfig.CurrentVersion
	if (current != nil && *current == v) || policy == SetCurrentNever || (policy == SetCurrentAuto && current != nil) {
		return Outcome{Current: current}, nil
	}
	if _, err := h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{
		BuildID: v.BuildID, ConflictToken: desc.ConflictToken}); err != nil {
		return Outcome{}, err
	}
	return Outcome{Made: true, Current: &v}, nil
}

// SetCurrent makes build id the current version of deployment name now: new
// runs, and the next tasks of AutoUpgrade runs, go to its workers; pinned
// runs stay on the build they started on. It refuses a build the server has
// never seen polling (its workers must be up first, or new runs would wait
// for nobody) and one that lacks a task queue the current build polls. It
// returns the version that was current before (nil: none).
func SetCurrent(ctx context.Context, cl client.Client, name, buildID string) (*worker.WorkerDeploymentVersion, error) {
	h := cl.WorkerDeploymentClient().GetHandle(name)
	desc, err := describe(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("deployment %s: %w", name, explain(err))
	}
	if !slices.ContainsFunc(desc.Info.VersionSummaries, func(s client.WorkerDeploymentVersionSummary) bool { return s.Version.BuildID == buildID }) {
		return nil, fmt.Errorf("deployment %s has no build %s: start its workers first (builds it has: %s)", name, buildID,
			idList(desc.Info.VersionSummaries, func(s client.WorkerDeploymentVersionSummary) string { return s.Version.BuildID }))
	}
	previous := desc.Info.RoutingConfig.CurrentVersion
	if previous != nil && previous.BuildID == buildID {
		return previous, nil
	}
	if _, err := h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: buildID, ConflictToken: desc.ConflictToken}); err != nil {
		return nil, fmt.Errorf("make build %s current in deployment %s: %w", buildID, name, explain(err))
	}
	return previous, nil
}

// waitRegistered polls until the version's description lists both of the
// task queue's types. It asks in the order the server creates things (the
// deployment, its version, the version's queues) so that it never asks
// about something that does not exist yet, which the server logs as an
// error.
func waitRegistered(ctx context.Context, cl client.Client, h client.WorkerDeploymentHandle, v worker.WorkerDeploymentVersion, taskQueue string, log *slog.Logger) error {
	for {
		err := registered(ctx, cl, h, v, taskQueue)
		if err == nil {
			return nil
		}
		if !retryable(err) {
			return err
		}
		log.Debug("waiting for the server to register this build", "build_id", v.BuildID, "error", err.Error())
		if err := pause(ctx, err); err != nil {
			return err
		}
	}
}

// registered is nil once the version polls taskQueue, else what is missing.
func registered(ctx context.Context, cl client.Client, h client.WorkerDeploymentHandle, v worker.WorkerDeploymentVersion, taskQueue string) error {
	if ok, err := listed(ctx, cl, v.DeploymentName); err != nil || !ok {
		return errors.Join(err, errors.New("deployment not listed yet"))
	}
	desc, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(desc.Info.VersionSummaries, func(s client.WorkerDeploymentVersionSummary) bool { return s.Version == v }) {
		return errors.New("build not in the deployment yet")
	}
	vd, err := h.DescribeVersion(ctx, client.WorkerDeploymentDescribeVersionOptions{BuildID: v.BuildID})
	if err != nil {
		return err
	}
	if !polls(vd.Info, taskQueue, client.TaskQueueTypeWorkflow) || !polls(vd.Info, taskQueue, client.TaskQueueTypeActivity) {
		return fmt.Errorf("task queue %s not registered yet", taskQueue)
	}
	return nil
}

// listed reports whether the namespace's deployments include name.
func listed(ctx context.Context, cl client.Client, name string) (bool, error) {
	it, err := cl.WorkerDeploymentClient().List(ctx, client.WorkerDeploymentListOptions{})
	if err != nil {
		return false, err
	}
	for it.HasNext() {
		d, err := it.Next()
		if err != nil {
			return false, err
		}
		if d.Name == name {
			return true, nil
		}
	}
	return false, nil
}

func polls(info client.WorkerDeploymentVersionInfo, taskQueue string, kind client.TaskQueueType) bool {
	return slices.ContainsFunc(info.TaskQueuesInfos, func(q client.WorkerDeploymentTaskQueueInfo) bool {
		return q.Name == taskQueue && q.Type == kind
	})
}

// retryable: the answers of a server that has not caught up with the
// build's first polls yet (no such deployment or version, a task queue not
// registered, a conflicting change just made) or that is briefly away.
// A refusal of the request itself (a bad name, no permission, another
// manager identity) is final.
func retryable(err error) bool {
	var invalid *serviceerror.InvalidArgument
	var denied *serviceerror.PermissionDenied
	var unimplemented *serviceerror.Unimplemented
	return !errors.As(err, &invalid) && !errors.As(err, &denied) && !errors.As(err, &unimplemented)
}

// pause waits retryEvery, or returns the last error once ctx has ended.
func pause(ctx context.Context, last error) error {
	select {
	case <-ctx.Done():
		return errors.Join(ctx.Err(), last)
	case <-time.After(retryEvery):
		return nil
	}
}

// notFoundFor is how long a deployment said not to exist is asked again:
// a loaded dev server has answered NotFound for a deployment it had
// described a moment before.
const notFoundFor = 2 * time.Second

// describe reads the deployment, asking again for up to notFoundFor while
// the server says it does not exist.
func describe(ctx context.Context, h client.WorkerDeploymentHandle) (client.WorkerDeploymentDescribeResponse, error) {
	until := time.Now().Add(notFoundFor)
	for {
		desc, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
		var notFound *serviceerror.NotFound
		if err == nil || !errors.As(err, &notFound) || time.Now().After(until) {
			return desc, err
		}
		if err := pause(ctx, err); err != nil {
			return desc, err
		}
	}
}

// explain adds what an operator can do to the server's terse refusals.
func explain(err error) error {
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return fmt.Errorf("%w (no worker of it has polled this namespace yet: is the deployment name right?)", err)
	}
	return err
}

// idList is the build ids of items, for a message.
func idList[T any](items []T, id func(T) string) string {
	if len(items) == 0 {
		return "none"
	}
	ids := make([]string, len(items))
	for i, item := range items {
		ids[i] = id(item)
	}
	return fmt.Sprint(ids)
}
