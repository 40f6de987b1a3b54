package service

import (
	"context"
	"flag"
	"fmt"
	"log/slog"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/deployment"
	"github.com/payguard/payguard/workflows"
)

// Worker Versioning (docs/rollout.md): the worker polls as one build of one
// deployment, and the server gives it only the runs of that build.

func registerVersioning(fs *flag.FlagSet, getenv func(string) string, c *Config) {
	fs.StringVar(&c.DeploymentName, "deployment-name", deployment.Name(getenv),
		"the Worker Deployment this worker belongs to (env "+deployment.NameEnv+")")
	fs.StringVar(&c.BuildID, "build-id", getenv(deployment.BuildIDEnv),
		"the build this worker runs as: a change to workflow code needs a new one (env "+deployment.BuildIDEnv+"; empty: this binary's own, its commit, <commit>+dirty-<digest> with uncommitted changes, build-<digest> unstamped; the start log shows it)")
	fs.StringVar(&c.SetCurrent, "set-current", config.Env(getenv, deployment.SetCurrentEnv, deployment.SetCurrentAuto),
		"once registered, make this build the deployment's current version (new runs go to it): auto (only when the deployment has none), always, or never (`starter deployment set-current` does it) (env "+deployment.SetCurrentEnv+")")
}

// deploymentName, buildID and setCurrent are the settings with their
// defaults, for a Config built in code (tests).
func (c Config) deploymentName() string {
	if c.DeploymentName == "" {
		return deployment.DefaultName
	}
	return c.DeploymentName
}

func (c Config) buildID() string {
	if c.BuildID == "" {
		return deployment.DefaultBuildID()
	}
	return c.BuildID
}

func (c Config) setCurrent() string {
	if c.SetCurrent == "" {
		return deployment.SetCurrentAuto
	}
	return c.SetCurrent
}

// version is the deployment version this worker polls as.
func (c Config) version() worker.WorkerDeploymentVersion {
	return deployment.Version(c.deploymentName(), c.buildID())
}

func (c Config) validateVersioning() error {
	if err := deployment.CheckName(c.deploymentName()); err != nil {
		return fmt.Errorf("configuration: --deployment-name: %w", err)
	}
	if err := deployment.CheckBuildID(c.buildID()); err != nil {
		return fmt.Errorf("configuration: --build-id: %w", err)
	}
	if err := deployment.CheckSetCurrent(c.setCurrent()); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	return nil
}

// versioningAttrs are the settings as the start log shows them.
func (c Config) versioningAttrs() []any {
	return []any{"deployment_name", c.deploymentName(), "build_id", c.buildID(), "set_current", c.setCurrent()}
}

// registerWorkflows registers the workflows this build runs.
func (c Config) registerWorkflows(r worker.WorkflowRegistry) {
	if c.RegisterWorkflows != nil {
		c.RegisterWorkflows(r, c.Tuning())
		return
	}
	workflows.New(c.Tuning()).Register(r)
}

// applySetCurrent waits until the server knows this build, then applies
// --set-current, so that a worker that says it is ready is one new runs
// reach (or the log says why not).
func (c Config) applySetCurrent(ctx context.Context, cl client.Client, log *slog.Logger) error {
	v := c.version()
	out, err := deployment.Apply(ctx, cl, v, c.TaskQueue, c.setCurrent(), log)
	if err != nil {
		return err
	}
	attrs := []any{"deployment_name", v.DeploymentName, "build_id", v.BuildID, "set_current", c.setCurrent()}
	switch {
	case out.Made:
		log.Info("this build is now the deployment's current version: new runs come to it", attrs...)
	case out.Current != nil && *out.Current == v:
		log.Info("this build is the deployment's current version", attrs...)
	case out.Current != nil:
		log.Info("another build is the deployment's current version: this one takes only runs pinned to it until it is made current",
			append(attrs, "current_build_id", out.Current.BuildID)...)
	default:
		log.Warn("the deployment has no current version: no new run is dispatched until one is set (starter deployment set-current)", attrs...)
	}
	return nil
}
