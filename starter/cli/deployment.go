package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/payguard/payguard/deployment"
	"github.com/payguard/payguard/internal/exitcode"
)

// The rollout of a new build (docs/rollout.md): start its workers, make it
// current, wait until the old build's pinned runs have drained, stop the old
// workers.

// Defaults of `deployment wait-drained`.
const (
	// DefaultDrainGrace is how long a build must have been out of the
	// routing before it counts as drained: visibility may show a run that
	// was pinned just before the switch a moment late.
	DefaultDrainGrace = time.Minute
	// DefaultDrainTimeout outlasts the longest order (the deadline's
	// default, a day) with room for its compensation.
	DefaultDrainTimeout = 25 * time.Hour
	drainEvery          = 2 * time.Second
)

// DeploymentSetCurrent is what `deployment set-current` prints.
type DeploymentSetCurrent struct {
	DeploymentName  string `json:"deploymentName"`
	BuildID         string `json:"buildId"`
	PreviousBuildID string `json:"previousBuildId"`
}

func runDeployment(ctx context.Context, args []string, env Env) error {
	const subs = "set-current, describe, wait-drained"
	if len(args) == 0 {
		return exitcode.UsageError(fmt.Errorf("deployment: want a subcommand (%s)", subs))
	}
	switch args[0] {
	case "set-current":
		return runSetCurrent(ctx, args[1:], env)
	case "describe":
		return runDescribeDeployment(ctx, args[1:], env)
	case "wait-drained":
		return runWaitDrained(ctx, args[1:], env)
	}
	return exitcode.UsageError(fmt.Errorf("deployment: unknown subcommand %q (%s)", args[0], subs))
}

// deploymentCommand is a `deployment` subcommand: the deployment it is
// about and, for some, one of its builds.
type deploymentCommand struct {
	*command
	deployment string
	buildID    *string
}

// newDeploymentCommand adds --deployment-name and, when buildUsage is
// not empty, a required --build-id.
func newDeploymentCommand(sub, buildUsage string, env Env) *deploymentCommand {
	d := &deploymentCommand{command: newCommand("deployment "+sub, env)}
	d.fs.StringVar(&d.deployment, "deployment-name", deployment.Name(env.Getenv), "the Worker Deployment (env "+deployment.NameEnv+")")
	if buildUsage != "" {
		d.buildID = d.fs.String("build-id", "", buildUsage+" (required)")
	}
	return d
}

// parse reads the flags and checks the names before anything is dialled.
func (d *deploymentCommand) parse(args []string) error {
	if err := d.command.parse(args, 0); err != nil {
		return err
	}
	if err := deployment.CheckName(d.deployment); err != nil {
		return exitcode.UsageError(fmt.Errorf("%s: --deployment-name: %w", d.name, err))
	}
	if d.buildID != nil {
		if err := deployment.CheckBuildID(*d.buildID); err != nil {
			return exitcode.UsageError(fmt.Errorf("%s: --build-id: %w", d.name, err))
		}
	}
	return nil
}

func runSetCurrent(ctx context.Context, args []string, env Env) error {
	d := newDeploymentCommand("set-current", "the build to make current; its workers must be running", env)
	if err := d.parse(args); err != nil {
		return err
	}
	cl, err := d.dialTemporal(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	buildID := *d.buildID
	previous, err := deployment.SetCurrent(ctx, cl, d.deployment, buildID)
	if err != nil {
		return fmt.Errorf("deployment set-current: %w", err)
	}
	out := DeploymentSetCurrent{DeploymentName: d.deployment, BuildID: buildID}
	text := fmt.Sprintf("build %s is the current version of deployment %s: new orders go to it", buildID, d.deployment)
	if previous != nil && previous.BuildID != buildID {
		out.PreviousBuildID = previous.BuildID
		text += fmt.Sprintf("; build %s keeps its pinned runs (`starter deployment wait-drained --build-id %s`, then stop its workers)",
			previous.BuildID, previous.BuildID)
	}
	return d.print(out, text)
}

func runDescribeDeployment(ctx context.Context, args []string, env Env) error {
	d := newDeploymentCommand("describe", "", env)
	grace := d.fs.Duration("grace", DefaultDrainGrace, "an inactive build counts as drained once out of the routing this long with no pinned run open")
	if err := d.parse(args); err != nil {
		return err
	}
	if *grace < 0 {
		return exitcode.UsageError(fmt.Errorf("deployment describe: --grace must not be negative, got %s", *grace))
	}
	cl, err := d.dialTemporal(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	st, err := deployment.Describe(ctx, cl, d.deployment, *grace)
	if err != nil {
		return fmt.Errorf("deployment describe: %w", err)
	}
	return d.print(st, statusText(st))
}

func runWaitDrained(ctx context.Context, args []string, env Env) error {
	d := newDeploymentCommand("wait-drained", "the old build to wait for", env)
	grace := d.fs.Duration("grace", DefaultDrainGrace, "the build must have been out of the routing this long with no pinned run open")
	timeout := d.fs.Duration("timeout", DefaultDrainTimeout, "give up after this long (exit 1)")
	if err := d.parse(args); err != nil {
		return err
	}
	if *grace < 0 || *timeout <= 0 {
		return exitcode.UsageError(fmt.Errorf("deployment wait-drained: --grace must not be negative and --timeout must be positive"))
	}
	cl, err := d.dialTemporal(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	waitCtx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	b, err := deployment.WaitDrained(waitCtx, cl, d.deployment, *d.buildID, *grace, drainEvery, func(b deployment.BuildStatus) {
		if !*d.json && !b.Drained {
			fmt.Fprintf(env.Stdout, "build %s: %s, %d pinned runs open\n", b.BuildID, b.Role, b.RunningPinned)
		}
	})
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w (after --timeout %s)", err, *timeout)
	}
	if err != nil {
		return fmt.Errorf("deployment wait-drained: %w", err)
	}
	return d.print(b, fmt.Sprintf("build %s has drained: no pinned run is open on it, so its workers can stop", b.BuildID))
}

// statusText is a deployment's status as a table, newest build first.
func statusText(st deployment.Status) string {
	var b strings.Builder
	current := st.Current
	if current == "" {
		current = "none (no new run is dispatched to a versioned worker)"
	}
	fmt.Fprintf(&b, "deployment %s: current build %s", st.Name, current)
	if st.Ramping != "" {
		fmt.Fprintf(&b, ", build %s ramping at %g%%", st.Ramping, st.Ramp)
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BUILD\tROLE\tPINNED RUNS OPEN\tDRAINED\tCREATED")
	for _, v := range st.Builds {
		drained := "-"
		if v.Role == deployment.RoleInactive {
			drained = map[bool]string{true: "yes: its workers can stop", false: "no"}[v.Drained]
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", v.BuildID, v.Role, v.RunningPinned, drained, v.Created.Format(time.RFC3339))
	}
	_ = tw.Flush()
	return strings.TrimRight(b.String(), "\n")
}
