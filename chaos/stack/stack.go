// Package stack starts payguard's real stack for a chaos run — a fresh
// PostgreSQL database, the Temporal dev server on a file database (or the
// real server on PostgreSQL databases of its own), pgsim
// and two worker processes — with every link between them going through an
// embedded fault proxy, and hands out the handles the fault schedule needs.
package stack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/client"

	"github.com/payguard/payguard/codec"
	"github.com/payguard/payguard/config"
	"github.com/payguard/payguard/internal/process"
	"github.com/payguard/payguard/internal/temporalserver"
	"github.com/payguard/payguard/store"
)

// Options say where the binaries are and how the services are set up.
type Options struct {
	Bin          string // pgsim and worker binaries
	TemporalCLI  string
	Out          string // logs and the Temporal database file
	AdminDBURL   string // the PostgreSQL server's admin database
	Secret       string
	PgsimArgs    []string // pgsim's fault flags (the calm baseline)
	WorkerArgs   []string // worker tuning flags
	Workers      int
	DatabaseName string
	// Direct connects the services to each other without the fault
	// proxies (the links then take no faults): the benchmark's stack.
	Direct bool
	// TemporalArgs are appended to the dev server's command line
	// (devserver.Args), e.g. devserver.EagerArgs; the real server takes
	// their --dynamic-config-value pairs as dynamic config.
	TemporalArgs []string
	// Temporal is which server the stack runs on (the dev server when "").
	Temporal temporalserver.Kind
}

// Stack is the running stack.
type Stack struct {
	Links    *Links
	Temporal *Temporal
	Pgsim    *Pgsim
	Workers  []*Worker
	// DBURL reaches the chaos database directly (the checker's view).
	DBURL      string
	adminDBURL string
	dbName     string
	Client     client.Client
}

// Start brings everything up, in dependency order; on error whatever was
// started is stopped and the run's database dropped, and the error is the
// service's own.
func Start(ctx context.Context, o Options) (*Stack, error) {
	s := &Stack{Links: newLinks(o.Direct), adminDBURL: o.AdminDBURL}
	up := false
	defer func() {
		if !up {
			s.Stop(true)
		}
	}()
	if err := s.createDatabase(ctx, o.DatabaseName); err != nil {
		return nil, err
	}
	u, err := url.Parse(s.DBURL)
	if err != nil {
		return nil, err
	}
	pgProxy, err := s.Links.add(LinkPostgres, u.Host)
	if err != nil {
		return nil, err
	}
	u.Host = pgProxy
	workerDBURL := u.String()

	s.Temporal, err = startTemporal(ctx, o)
	if err != nil {
		return nil, err
	}
	s.Client, err = s.Temporal.Dial(ctx)
	if err != nil {
		return nil, err
	}
	temporalProxy, err := s.Links.add(LinkTemporal, s.Temporal.Addr)
	if err != nil {
		return nil, err
	}
	s.Pgsim, err = startPgsim(ctx, o)
	if err != nil {
		return nil, err
	}
	gatewayProxy, err := s.Links.add(LinkGateway, strings.TrimPrefix(s.Pgsim.GatewayURL, "http://"))
	if err != nil {
		return nil, err
	}
	callbackPath := "/"
	if cu, err := url.Parse(config.DefaultCallbackURL); err == nil {
		callbackPath = cu.Path
	}
	for i := range o.Workers {
		httpAddr, err := process.FreeAddr()
		if err != nil {
			return nil, err
		}
		cbProxy, err := s.Links.add(fmt.Sprintf("%s%d", LinkCallbackPrefix, i+1), httpAddr)
		if err != nil {
			return nil, err
		}
		w := &Worker{N: i + 1, HTTPAddr: httpAddr, CallbackPath: callbackPath, proc: &process.Process{
			Name: fmt.Sprintf("worker%d", i+1), Path: filepath.Join(o.Bin, "worker"), LogDir: o.Out,
			Args: append([]string{"--http-addr", httpAddr}, o.WorkerArgs...),
			Env: []string{"TEMPORAL_ADDRESS=" + temporalProxy, "TEMPORAL_NAMESPACE=" + config.DefaultNamespace,
				"TASK_QUEUE=" + config.DefaultTaskQueue, "DATABASE_URL=" + workerDBURL,
				"GATEWAY_URL=http://" + gatewayProxy, "GATEWAY_SECRET=" + o.Secret, codec.KeysEnv + "=" + s.Temporal.CodecKeys,
				"CALLBACK_URL=http://" + cbProxy + callbackPath},
		}}
		s.Workers = append(s.Workers, w)
		// One at a time: the first migrates the fresh database.
		if err := w.Start(ctx); err != nil {
			return nil, err
		}
	}
	up = true
	return s, nil
}

func (s *Stack) createDatabase(ctx context.Context, name string) error {
	admin, err := pgx.Connect(ctx, s.adminDBURL)
	if err != nil {
		return fmt.Errorf("postgres is not reachable at %s (run `make postgres`): %w", config.MaskURL(s.adminDBURL), err)
	}
	defer admin.Close(ctx)
	if name == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		name = "payguard_chaos_" + hex.EncodeToString(b)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(s.adminDBURL)
	if err != nil {
		return err
	}
	u.Path = "/" + name
	s.DBURL, s.dbName = u.String(), name
	return nil
}

// DatabaseName is the chaos run's own database.
func (s *Stack) DatabaseName() string { return s.dbName }

// TerminateBackends ends every PostgreSQL connection to the chaos database
// (the workers' and the checker's): a database crash as the clients see
// it, without restarting a cluster other tests may be using.
func (s *Stack) TerminateBackends(ctx context.Context) (int, error) {
	admin, err := pgx.Connect(ctx, s.adminDBURL)
	if err != nil {
		return 0, err
	}
	defer admin.Close(ctx)
	var n int
	err = admin.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = $1 AND pid <> pg_backend_pid()) t`, s.dbName).Scan(&n)
	return n, err
}

// OpenStore opens the chaos database directly, not through the fault proxy.
func (s *Stack) OpenStore(ctx context.Context) (*store.Store, error) { return store.Open(ctx, s.DBURL) }

// Stop stops everything in reverse order; dropDB drops the database too.
func (s *Stack) Stop(dropDB bool) {
	for i := len(s.Workers) - 1; i >= 0; i-- {
		_ = s.Workers[i].proc.Stop(workerGrace)
	}
	if s.Client != nil {
		s.Client.Close()
	}
	if s.Pgsim != nil {
		_ = s.Pgsim.proc.Stop(pgsimGrace)
	}
	if s.Temporal != nil {
		s.Temporal.stop(dropDB)
	}
	s.Links.close()
	if dropDB && s.dbName != "" {
		ctx := context.Background()
		if admin, err := pgx.Connect(ctx, s.adminDBURL); err == nil {
			_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{s.dbName}.Sanitize()+" WITH (FORCE)")
			admin.Close(ctx)
		}
	}
}
