package deployment

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// Roles of a build in its deployment's routing.
const (
	RoleCurrent  = "current"
	RoleRamping  = "ramping"
	RoleInactive = "inactive"
)

// Status is a deployment's routing and, per build, what still runs on it.
type Status struct {
	Name    string        `json:"deploymentName"`
	Current string        `json:"currentBuildId"` // "" when unversioned workers take new runs
	Ramping string        `json:"rampingBuildId,omitempty"`
	Ramp    float32       `json:"rampPercentage,omitempty"`
	Builds  []BuildStatus `json:"builds"`
}

// BuildStatus is one build of a deployment.
type BuildStatus struct {
	BuildID string    `json:"buildId"`
	Role    string    `json:"role"`
	Created time.Time `json:"createTime"`
	// RoutingChanged is when the build last became or stopped being current
	// or ramping (zero: never).
	RoutingChanged time.Time `json:"routingChangedTime"`
	// RunningPinned counts the open runs pinned to the build (visibility,
	// RunningPinnedQuery): its workers must stay up while it is above 0.
	RunningPinned int64 `json:"runningPinned"`
	// ServerDrainage is the server's own drainage status of an inactive
	// build (draining, drained), refreshed only every few minutes.
	ServerDrainage string `json:"serverDrainage,omitempty"`
	// Drained: inactive, no pinned run open, and inactive for at least the
	// grace the status was read with, so that a run pinned just before the
	// switch has reached visibility.
	Drained bool `json:"drained"`
}

// Build returns the status of one build, if the deployment has it.
func (s Status) Build(buildID string) (BuildStatus, bool) {
	i := slices.IndexFunc(s.Builds, func(b BuildStatus) bool { return b.BuildID == buildID })
	if i < 0 {
		return BuildStatus{}, false
	}
	return s.Builds[i], true
}

// Describe reads a deployment's status. A build counts as drained only
// once it has been inactive for grace: visibility may take a moment to
// show a run pinned just before the build stopped being current.
func Describe(ctx context.Context, cl client.Client, name string, grace time.Duration) (Status, error) {
	h := cl.WorkerDeploymentClient().GetHandle(name)
	desc, err := describe(ctx, h)
	if err != nil {
		return Status{}, fmt.Errorf("deployment %s: %w", name, explain(err))
	}
	routing := desc.Info.RoutingConfig
	st := Status{Name: name, Ramp: routing.RampingVersionPercentage}
	if routing.CurrentVersion != nil {
		st.Current = routing.CurrentVersion.BuildID
	}
	if routing.RampingVersion != nil {
		st.Ramping = routing.RampingVersion.BuildID
	}
	for _, s := range desc.Info.VersionSummaries {
		b := BuildStatus{BuildID: s.Version.BuildID, Role: RoleInactive, Created: s.CreateTime}
		switch b.BuildID {
		case st.Current:
			b.Role = RoleCurrent
		case st.Ramping:
			b.Role = RoleRamping
		}
		if b.Role == RoleInactive {
			b.ServerDrainage = drainage(s.DrainageStatus)
		}
		vd, err := h.DescribeVersion(ctx, client.WorkerDeploymentDescribeVersionOptions{BuildID: b.BuildID})
		if err != nil {
			return Status{}, fmt.Errorf("deployment %s, build %s: %w", name, b.BuildID, err)
		}
		b.RoutingChanged = vd.Info.RoutingChangedTime
		count, err := cl.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: RunningPinnedQuery(s.Version)})
		if err != nil {
			return Status{}, fmt.Errorf("count the runs pinned to build %s: %w", b.BuildID, err)
		}
		b.RunningPinned = count.GetCount()
		b.Drained = b.Role == RoleInactive && b.RunningPinned == 0 && time.Since(b.RoutingChanged) >= grace
		st.Builds = append(st.Builds, b)
	}
	slices.SortFunc(st.Builds, func(a, b BuildStatus) int { return b.Created.Compare(a.Created) })
	return st, nil
}

func drainage(s client.WorkerDeploymentVersionDrainageStatus) string {
	switch s {
	case client.WorkerDeploymentVersionDrainageStatusDraining:
		return "draining"
	case client.WorkerDeploymentVersionDrainageStatusDrained:
		return "drained"
	}
	return ""
}

// WaitDrained polls Describe every `every` until build buildID is drained,
// calling progress with each status read; it fails at once if the build
// is unknown, and when ctx ends.
func WaitDrained(ctx context.Context, cl client.Client, name, buildID string, grace, every time.Duration, progress func(BuildStatus)) (BuildStatus, error) {
	for {
		st, err := Describe(ctx, cl, name, grace)
		if err != nil {
			return BuildStatus{}, err
		}
		b, ok := st.Build(buildID)
		if !ok {
			return BuildStatus{}, fmt.Errorf("deployment %s has no build %s (builds it has: %s)", name, buildID,
				idList(st.Builds, func(b BuildStatus) string { return b.BuildID }))
		}
		if progress != nil {
			progress(b)
		}
		if b.Drained {
			return b, nil
		}
		select {
		case <-ctx.Done():
			return b, fmt.Errorf("build %s of deployment %s has not drained: %s, %d pinned runs open: %w", buildID, name, b.Role, b.RunningPinned, ctx.Err())
		case <-time.After(every):
		}
	}
}
