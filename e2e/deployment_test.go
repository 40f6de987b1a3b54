package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/payguard/payguard/deployment"
	"github.com/payguard/payguard/internal/testenv"
	"github.com/payguard/payguard/starter/cli"
	"github.com/payguard/payguard/status"
	"github.com/payguard/payguard/worker/service"
)

// deploymentStatus is the stack's deployment as `starter deployment
// describe --json` prints it, with the extra flags given.
func deploymentStatus(t *testing.T, s *testenv.Stack, extra ...string) deployment.Status {
	t.Helper()
	st, err := describeDeployment(s, extra...)
	require.NoError(t, err)
	return st
}

// describeDeployment is deploymentStatus's command, its error returned.
func describeDeployment(s *testenv.Stack, extra ...string) (deployment.Status, error) {
	var st deployment.Status
	out, err := starter(context.Background(), s, append([]string{"deployment", "describe", "--json"}, extra...)...)
	if err != nil {
		return st, fmt.Errorf("%w: %s", err, out)
	}
	return st, json.Unmarshal([]byte(out), &st)
}

// --set-current: the first build of a deployment becomes current on its
// own (auto); a second one started beside it does not, unless it says
// always; never leaves the routing as it is; and new orders go to
// whichever build is current.
func TestSetCurrentPolicies(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.QuietFaults(), func(c *service.Config) { c.BuildID = "first" })
	setStock(t, s, "P1", 5)
	assert.Equal(t, "first", deploymentStatus(t, s).Current, "auto, on a deployment without a current version")

	s.StartWorker(t, func(c *service.Config) { c.BuildID = "second" })
	s.StartWorker(t, func(c *service.Config) { c.BuildID, c.SetCurrent = "third", deployment.SetCurrentNever })
	// A build is registered by its first poll, which a loaded machine may
	// not have made yet.
	var st deployment.Status
	testenv.Eventually(t, 15*time.Second, func() bool {
		var err error
		if st, err = describeDeployment(s); err != nil {
			return false
		}
		_, second := st.Build("second")
		_, third := st.Build("third")
		return second && third
	}, "both builds registered")
	assert.Equal(t, "first", st.Current, "neither auto beside a current build nor never moves the routing")
	for _, id := range []string{"second", "third"} {
		b, ok := st.Build(id)
		require.True(t, ok, "build %s registered: %+v", id, st)
		assert.Equal(t, deployment.RoleInactive, b.Role)
	}

	s.StartWorker(t, func(c *service.Config) { c.BuildID, c.SetCurrent = "fourth", deployment.SetCurrentAlways })
	assert.Equal(t, "fourth", deploymentStatus(t, s).Current, "always")
	s.StartWorker(t, func(c *service.Config) { c.BuildID = "first" })
	assert.Equal(t, "fourth", deploymentStatus(t, s).Current, "a restarted worker of an older build does not take the routing back")

	placeOrder(t, s, "policy-order", "P1", 2)
	waitOrder(t, s, "policy-order", status.OrderConfirmed, 30*time.Second)
	assert.Equal(t, []string{"fourth"}, buildsThatRan(t, "policy-order"))

	out, err := starter(context.Background(), s, "deployment", "describe", "--grace", "1h")
	require.NoError(t, err)
	assert.Contains(t, out, "deployment "+s.Config.DeploymentName+": current build fourth\n")
	assert.Regexp(t, `(?m)^fourth +current +0 +- `, out)
	assert.Regexp(t, `(?m)^first +inactive +0 +no `, out, "out of the routing for less than --grace")
	assert.Regexp(t, `(?m)^second +inactive +0 +yes: its workers can stop `, out, "never current, nothing pinned")
}

// Replicas of one build starting at once on a fresh deployment all start,
// and the build is current once: the conflict token makes the second
// change a no-op, not an error.
func TestWorkersOfOneBuildStartingAtOnceAgree(t *testing.T) {
	t.Parallel()
	s := testenv.NewStack(t, testenv.QuietFaults(), func(c *service.Config) { c.BuildID, c.SetCurrent = "replica", deployment.SetCurrentNever })
	assert.Empty(t, deploymentStatus(t, s).Current, "never: the deployment has no current version yet")
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		cfg := s.Config
		cfg.SetCurrent = deployment.SetCurrentAuto
		l := testenv.Listen(t)
		cfg.Listener, cfg.HTTPAddr = l, l.Addr().String()
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			w, err := service.Start(ctx, cfg, testenv.Logger(t))
			if errs[i] = err; err == nil {
				t.Cleanup(func() { _ = w.Stop() })
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
	assert.Equal(t, "replica", deploymentStatus(t, s).Current)
}

// The deployment commands check what they are given before dialling (the
// address is unreachable: a dial would fail otherwise), and refuse to make
// current a build no worker has run.
func TestDeploymentCommandsRejectBadInput(t *testing.T) {
	t.Parallel()
	env := cli.Env{Getenv: func(string) string { return "" }, Stdout: io.Discard, Stderr: io.Discard}
	unreachable := []string{"--temporal-address", "127.0.0.1:1"}
	for want, args := range map[string][]string{
		"unknown subcommand \"promote\"":     {"deployment", "promote"},
		"--build-id: build id \"\" must be":  {"deployment", "set-current"},
		"--deployment-name: deployment name": {"deployment", "describe", "--deployment-name", "a.b"},
		"--build-id: build id \"a b\"":       {"deployment", "wait-drained", "--build-id", "a b"},
		"--timeout must be positive":         {"deployment", "wait-drained", "--build-id", "a", "--timeout", "0s"},
		"--grace must not be negative":       {"deployment", "describe", "--grace", "-1s"},
	} {
		err := cli.Run(context.Background(), append(args, unreachable...), env)
		require.Error(t, err, "%v", args)
		assert.Contains(t, err.Error(), want, "%v", args)
	}
	assert.ErrorContains(t, cli.Run(context.Background(), []string{"deployment"}, env), "want a subcommand (set-current, describe, wait-drained)")

	s := testenv.NewStack(t, testenv.QuietFaults(), func(c *service.Config) { c.BuildID = "only" })
	out, err := starter(context.Background(), s, "deployment", "set-current", "--build-id", "never-ran")
	require.Error(t, err, out)
	assert.Contains(t, err.Error(), "has no build never-ran: start its workers first (builds it has: [only])")
	_, err = starter(context.Background(), s, "deployment", "wait-drained", "--build-id", "never-ran")
	assert.ErrorContains(t, err, "has no build never-ran")
	_, err = starter(context.Background(), s, "deployment", "describe", "--deployment-name", "nobody")
	assert.ErrorContains(t, err, "no worker of it has polled this namespace yet")
	assert.Equal(t, "only", deploymentStatus(t, s).Current, "nothing changed")
}

// buildsThatRan lists the builds that completed the order's workflow
// tasks, each once, and checks each task ran pinned.
func buildsThatRan(t *testing.T, orderID string) []string {
	t.Helper()
	var builds []string
	for _, e := range history(t, orderID) {
		if done := e.GetWorkflowTaskCompletedEventAttributes(); done != nil {
			assert.Equal(t, enumspb.VERSIONING_BEHAVIOR_PINNED, done.GetVersioningBehavior())
			if b := done.GetDeploymentVersion().GetBuildId(); len(builds) == 0 || builds[len(builds)-1] != b {
				builds = append(builds, b)
			}
		}
	}
	return builds
}
