// Package e2e holds the end-to-end tests: payguard's behaviour on the real
// stack (Temporal dev server, PostgreSQL, pgsim, the worker in process or
// as its binary, the starter), each file named for what its tests prove —
// a gateway outage, an operator's cancel during a step, a worker killed or
// stalled mid-create, the reconciliation sweep, the recorded histories.
package e2e
