package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/payguard/payguard/activities"
	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/worker/metrics"
	"github.com/payguard/payguard/workflows"
)

// The reconciliation sweep's part of the worker (docs/design.md §10): the
// Temporal Schedule that runs it, the question "is this order's workflow
// running?" its activities ask, and its metrics.

// EnsureSchedule creates the sweep's schedule, or brings an existing one to
// this worker's settings (the last worker started wins, as with any flag).
// With --reconcile-interval 0 an existing schedule is paused, none created.
func EnsureSchedule(ctx context.Context, c client.Client, cfg Config) error {
	id := config.ReconcileScheduleID(cfg.TaskQueue)
	handle := c.ScheduleClient().GetHandle(ctx, id)
	if cfg.ReconcileInterval == 0 {
		err := handle.Pause(ctx, client.SchedulePauseOptions{Note: "paused by a worker started with --reconcile-interval 0"})
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			return nil
		}
		return err
	}
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: cfg.ReconcileInterval}}}
	action := &client.ScheduleWorkflowAction{
		ID: id, Workflow: workflows.ReconcileWorkflowName, TaskQueue: cfg.TaskQueue,
		Args:          []any{workflows.ReconcileInput{Window: cfg.ReconcileWindow}},
		StaticSummary: fmt.Sprintf("Reconciliation sweep over the last %s", cfg.ReconcileWindow),
	}
	note := fmt.Sprintf("every %s over the last %s", cfg.ReconcileInterval, cfg.ReconcileWindow)
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{ID: id, Spec: spec, Action: action,
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, Note: note})
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return err
	}
	return handle.Update(ctx, client.ScheduleUpdateOptions{DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
		s := in.Description.Schedule
		s.Spec, s.Action = &spec, action
		if s.Policy == nil {
			s.Policy = &client.SchedulePolicies{}
		}
		s.Policy.Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
		s.State = &client.ScheduleState{Note: note}
		return &client.ScheduleUpdate{Schedule: &s}, nil
	}})
}

// workflowsRunning answers the sweep (activities.Running) from Temporal:
// the order's workflow (PaymentWorkflow, or a recovery under the same id),
// or a refund of one of its charges.
type workflowsRunning struct{ c client.Client }

func (w workflowsRunning) Payment(ctx context.Context, orderID string) (bool, error) {
	return w.running(ctx, workflows.PaymentWorkflowID(orderID))
}

func (w workflowsRunning) Refund(ctx context.Context, orderID, transactionKey string) (bool, error) {
	return w.running(ctx, workflows.RefundWorkflowID(orderID, transactionKey))
}

func (w workflowsRunning) running(ctx context.Context, workflowID string) (bool, error) {
	d, err := w.c.DescribeWorkflow(ctx, workflowID, "")
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return d.RawResponse.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}

// reconcileMetrics are the sweep's metrics (activities.SweepObserver).
type reconcileMetrics struct {
	findings  *prometheus.CounterVec
	lastSweep prometheus.Gauge
	duration  prometheus.Gauge
}

func newReconcileMetrics(reg prometheus.Registerer) *reconcileMetrics {
	m := &reconcileMetrics{
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{Name: metrics.ReconcileFindings,
			Help: "Findings of the reconciliation sweep, by finding and the action taken."}, []string{"finding", "action"}),
		lastSweep: prometheus.NewGauge(prometheus.GaugeOpts{Name: metrics.ReconcileLastSweep,
			Help: "When the last reconciliation sweep that ran on this worker ended (Unix seconds)."}),
		duration: prometheus.NewGauge(prometheus.GaugeOpts{Name: metrics.ReconcileDuration,
			Help: "How long the last reconciliation sweep that ran on this worker took."}),
	}
	reg.MustRegister(m.findings, m.lastSweep, m.duration)
	for _, fa := range activities.FindingActions {
		m.findings.WithLabelValues(fa[0], fa[1])
	}
	return m
}

func (m *reconcileMetrics) ReconcileFindings(finding, action string, n int) {
	m.findings.WithLabelValues(finding, action).Add(float64(n))
}

func (m *reconcileMetrics) SweepDone(at time.Time, took time.Duration) {
	m.lastSweep.Set(float64(at.UnixNano()) / 1e9)
	m.duration.Set(took.Seconds())
}
