// Package payguard is a payment orchestrator built on Temporal: an order
// holds its stock in PostgreSQL, a durable workflow charges the card at the
// payment gateway and drives the payment to a definite end whatever the
// gateway does. See README.md; the code lives in the subpackages. This
// package holds only the checks of the repository's deployment files.
package payguard
