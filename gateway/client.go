package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/payguard/payguard/ids"
	"github.com/payguard/payguard/telemetry"
)

// Config configures a Client.
type Config struct {
	BaseURL string // e.g. http://127.0.0.1:8090
	UserID  string // sent as X-USER-ID when a call names none; follows the ids rule
	// ConnectTimeout bounds the TCP dial and TLS handshake: a call that fails
	// within it never reached the gateway.
	ConnectTimeout time.Duration
	// ReadTimeout bounds the wait for the answer once the request is on the
	// wire: a call that fails within it has an unknown outcome.
	ReadTimeout time.Duration
}

// The client's timeouts when its Config names none, and the worker's
// --connect-timeout and --read-timeout defaults: one create needs at most
// their sum, which the workflow's activity timeouts are derived from.
const (
	DefaultConnectTimeout = time.Second
	DefaultReadTimeout    = 3 * time.Second
)

// MaxCallTime is the longest one call of a Client with these timeouts can
// take before it ends one way or another: the dial and the TLS handshake
// are each bounded by connect, the wait for the answer's headers by read,
// and then reading its body by read again (its own timer, in do).
func MaxCallTime(connect, read time.Duration) time.Duration { return 2*connect + 2*read }

// Client calls the gateway. It is safe for concurrent use.
type Client struct {
	base   *url.URL
	userID string
	read   time.Duration
	http   *http.Client
}

// maxAnswerBytes bounds what the client reads of an answer.
const maxAnswerBytes = 1 << 20

// New builds a Client.
func New(cfg Config) (*Client, error) {
	base, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("gateway url %q: want http(s)://host:port", cfg.BaseURL)
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.UserID == "" {
		cfg.UserID = "payguard"
	}
	if err := ids.CheckUser(cfg.UserID); err != nil {
		return nil, fmt.Errorf("gateway default user: %w", err)
	}
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   cfg.ConnectTimeout,
		ResponseHeaderTimeout: cfg.ReadTimeout,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   100,
		IdleConnTimeout:       90 * time.Second,
	}
	// A redirect is not followed: the first request reached a gateway, so
	// whatever the redirect's target does, a 3xx is "outcome unknown" —
	// following it could turn a refused dial there into "never reached".
	noRedirects := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{base: base, userID: cfg.UserID, read: cfg.ReadTimeout,
		http: &http.Client{Transport: telemetry.Transport("gateway", transport), CheckRedirect: noRedirects}}, nil
}

// Close drops idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// CheckCreate says whether CreatePayment would build this create, without
// sending anything: nil, or an ErrInvalidRequest naming what is wrong.
// userID may be "" for the client's default.
func (c *Client) CheckCreate(orderID, userID, idempotencyKey string) error {
	if userID == "" {
		userID = c.userID
	}
	for _, err := range []error{ids.CheckNewOrder(orderID), ids.CheckUser(userID), checkHeader("Idempotency-Key", idempotencyKey)} {
		if err != nil {
			return &Error{Class: ErrInvalidRequest, Op: "create", Err: err}
		}
	}
	return nil
}

// CreatePayment asks the gateway to charge a card. userID may be "" for the
// client's default; idempotencyKey may be "" for none.
func (c *Client) CreatePayment(ctx context.Context, req CreateRequest, userID, idempotencyKey string) (Created, error) {
	if err := c.CheckCreate(req.OrderID, userID, idempotencyKey); err != nil {
		return Created{}, err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return Created{}, &Error{Class: ErrInvalidRequest, Op: "create", Err: err}
	}
	headers := http.Header{}
	if userID == "" {
		userID = c.userID
	}
	headers.Set("X-USER-ID", userID)
	if idempotencyKey != "" {
		headers.Set("Idempotency-Key", idempotencyKey)
	}
	var data TransactionSummary
	resp, err := c.do(ctx, "create", http.MethodPost, "/api/v1/payments", headers, body, &data)
	if err != nil {
		return Created{}, err
	}
	if data.TransactionKey == "" {
		// A 2xx that names no transaction is an answer we cannot read: the
		// gateway may hold one, so the outcome is unknown — never "accepted".
		return Created{}, &Error{Class: ErrOutcomeUnknown, Op: "create", StatusCode: resp.StatusCode, Message: "answer names no transactionKey"}
	}
	return Created{TransactionKey: data.TransactionKey, OrderID: req.OrderID, Status: data.Status}, nil
}

// Payment looks a transaction up by its key.
func (c *Client) Payment(ctx context.Context, transactionKey string) (Transaction, error) {
	headers, err := c.user(ctx, "lookup")
	if err != nil {
		return Transaction{}, err
	}
	var info TransactionInfo
	_, err = c.do(ctx, "lookup", http.MethodGet, "/api/v1/payments/"+url.PathEscape(transactionKey), headers, nil, &info)
	return info.Transaction(), err
}

// PaymentsByOrder lists the gateway's transactions for an order (none is an
// empty list, not an error).
func (c *Client) PaymentsByOrder(ctx context.Context, orderID string) (OrderTransactions, error) {
	if err := ids.CheckOrder(orderID); err != nil {
		return OrderTransactions{}, &Error{Class: ErrInvalidRequest, Op: "lookup-by-order", Err: err}
	}
	headers, err := c.user(ctx, "lookup-by-order")
	if err != nil {
		return OrderTransactions{}, err
	}
	var info OrderInfo
	if _, err := c.do(ctx, "lookup-by-order", http.MethodGet, "/api/v1/payments?orderId="+url.QueryEscape(orderID), headers, nil, &info); err != nil {
		return OrderTransactions{}, err
	}
	return info.OrderTransactions(), nil
}

// Cancel cancels a transaction (a refund when it had succeeded). Cancelling
// twice answers the same.
func (c *Client) Cancel(ctx context.Context, transactionKey string) (Transaction, error) {
	headers, err := c.user(ctx, "cancel")
	if err != nil {
		return Transaction{}, err
	}
	var info TransactionInfo
	_, err = c.do(ctx, "cancel", http.MethodPost, "/api/v1/payments/"+url.PathEscape(transactionKey)+"/cancel", headers, nil, &info)
	return info.Transaction(), err
}

type userKey struct{}

// WithUser makes the lookups and cancels made with ctx name userID in
// X-USER-ID. The Loopers simulator scopes transactions to the user who paid:
// a lookup under another user finds nothing, and "nothing found" is what
// authorises a re-send — so calls about an order name the order's user.
func WithUser(ctx context.Context, userID string) context.Context {
	return context.WithValue(ctx, userKey{}, userID)
}

// user is the X-USER-ID header of a lookup or cancel: the user named by
// WithUser, else the client's default. The simulator's document requires
// the header on every endpoint, not only on create.
func (c *Client) user(ctx context.Context, op string) (http.Header, error) {
	userID, _ := ctx.Value(userKey{}).(string)
	if userID == "" {
		userID = c.userID
	}
	if err := ids.CheckUser(userID); err != nil {
		return nil, &Error{Class: ErrInvalidRequest, Op: op, Err: err}
	}
	return http.Header{"X-User-Id": {userID}}, nil
}

// do sends one request and classifies its failure. Whether a connection was
// ever obtained is what separates "never reached" from "outcome unknown":
// httptrace tells us, whatever the error's wording.
func (c *Client) do(ctx context.Context, op, method, path string, headers http.Header, body []byte, out any) (*http.Response, error) {
	// The transport retries by itself on a fresh connection when a kept-alive
	// one turns out dead — a POST without Idempotency-Key only when nothing
	// of it was written, one with the key (replayable to net/http) even after
	// the gateway read it all. So a request that may change something at the
	// gateway is unreachable only when no try began writing it (WroteRequest
	// is told of every write, failed or not) and the last one never got a
	// connection; a GET, which changes nothing, when the last try never got
	// one (its first may have been written to a kept-alive connection the
	// gateway had just closed).
	var connected, wrote atomic.Bool
	trace := &httptrace.ClientTrace{
		GetConn:      func(string) { connected.Store(false) },
		GotConn:      func(httptrace.GotConnInfo) { connected.Store(true) },
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
	}
	ctx = httptrace.WithClientTrace(ctx, trace)
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	// A request that cannot be built is refused here, before any connection:
	// net/http would refuse it too, but only inside the transport, where its
	// error is indistinguishable from a dial that failed — and "unreachable"
	// tells the caller the gateway is down and a retry is safe.
	for k, vs := range headers {
		for _, v := range vs {
			if err := checkHeader(k, v); err != nil {
				return nil, &Error{Class: ErrInvalidRequest, Op: op, Err: err}
			}
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, reader)
	if err != nil {
		return nil, &Error{Class: ErrInvalidRequest, Op: op, Err: err}
	}
	for k, v := range headers {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if !connected.Load() && (method == http.MethodGet || !wrote.Load()) {
			return nil, &Error{Class: ErrUnreachable, Op: op, Err: err}
		}
		return nil, &Error{Class: ErrOutcomeUnknown, Op: op, Err: err}
	}
	defer resp.Body.Close()
	// The body must come within the read timeout too: a gateway that sends
	// headers and then stalls is as silent as one that sends nothing.
	timer := time.AfterFunc(c.read, func() { resp.Body.Close() })
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	timer.Stop()
	if err != nil {
		return nil, &Error{Class: ErrOutcomeUnknown, Op: op, StatusCode: resp.StatusCode, Err: fmt.Errorf("read answer: %w", err)}
	}
	switch {
	case resp.StatusCode >= 500:
		e := &Error{Class: ErrOutcomeUnknown, Op: op, StatusCode: resp.StatusCode}
		decodeErrorBody(raw, e)
		return nil, e
	case resp.StatusCode >= 400:
		e := &Error{Class: ErrRejected, Op: op, StatusCode: resp.StatusCode}
		decodeErrorBody(raw, e)
		return nil, e
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		return nil, &Error{Class: ErrOutcomeUnknown, Op: op, StatusCode: resp.StatusCode, Message: "unexpected status"}
	}
	if err := decodeSuccess(raw, out); err != nil {
		// A 2xx we cannot read tells us nothing definitive.
		return nil, &Error{Class: ErrOutcomeUnknown, Op: op, StatusCode: resp.StatusCode, Err: fmt.Errorf("decode answer: %w", err)}
	}
	return resp, nil
}

// checkHeader refuses a header value HTTP cannot carry: control bytes
// other than tab (CR and LF would end the header) and DEL, as net/http does.
func checkHeader(name, value string) error {
	for i := 0; i < len(value); i++ {
		if b := value[i]; (b < ' ' && b != '\t') || b == 0x7f {
			return fmt.Errorf("header %s value %q cannot be sent over HTTP", name, value)
		}
	}
	return nil
}

// rawEnvelope is an Envelope whose data is decoded only once the meta says
// the call succeeded.
type rawEnvelope struct {
	Meta *Meta           `json:"meta"`
	Data json.RawMessage `json:"data"`
}

// decodeSuccess reads a 2xx answer: an envelope saying SUCCESS around
// non-null data. Anything else is not an answer we can act on.
func decodeSuccess(raw []byte, out any) error {
	var env rawEnvelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return err
	}
	switch {
	case env.Meta == nil:
		return errors.New("no meta: not the gateway's envelope")
	case env.Meta.Result != ResultSuccess:
		return fmt.Errorf("meta.result %q on a 2xx", env.Meta.Result)
	case len(env.Data) == 0 || string(env.Data) == "null":
		return errors.New("no data")
	}
	return json.Unmarshal(env.Data, out)
}

// decodeErrorBody takes the errorCode and message of an error answer; the
// status code has already decided the class, so a body that is not an
// envelope only loses the detail (its text becomes the message).
func decodeErrorBody(raw []byte, e *Error) {
	var env rawEnvelope
	if json.Unmarshal(raw, &env) == nil && env.Meta != nil {
		e.Code, e.Message = deref(env.Meta.ErrorCode), deref(env.Meta.Message)
	}
	if e.Code == "" {
		e.Message = strings.TrimSpace(string(raw))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200]
		}
	}
}

// IsNotFound reports whether err is a 404, whoever answered it: a proxy, a
// route not deployed and an injected fault answer 404 too. It is no proof
// that a transaction does not exist; NoSuchTransaction is.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.StatusCode == http.StatusNotFound
}

// NoSuchTransaction reports whether err is the gateway's own word that a
// transaction key is unknown: a 404 whose envelope carries the errorCode
// NOT_FOUND. Only a lookup or cancel by key can get it; a lookup by order
// id answers an unknown order with 200 and an empty list.
func NoSuchTransaction(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.StatusCode == http.StatusNotFound && e.Code == CodeNotFound
}
