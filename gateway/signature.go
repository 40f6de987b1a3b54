package gateway

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Callback headers.
const (
	HeaderSignature = "X-Signature"
	HeaderTimestamp = "X-Timestamp"
)

// DefaultTolerance is how far a callback's timestamp may be from now.
const DefaultTolerance = 5 * time.Minute

// Errors from Verify.
var (
	ErrBadSignature   = errors.New("bad callback signature")
	ErrStaleTimestamp = errors.New("callback timestamp out of tolerance")
)

// NewCallback builds the unsigned POST of a callback body to url; SignCallback
// signs it. pgsim sends callbacks with them and the starter's `callback`
// command forges them, so both sign exactly as Verify checks.
func NewCallback(ctx context.Context, url string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

// SignCallback sets a callback request's timestamp (now) and signature.
func SignCallback(req *http.Request, secret, body []byte, now time.Time) {
	ts := strconv.FormatInt(now.Unix(), 10)
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, Sign(secret, ts, body))
}

// Sign returns hex(HMAC-SHA256(secret, timestamp + "." + body)).
func Sign(secret []byte, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(timestamp))
	mac.Write([]byte("."))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// Verify checks a callback's signature (in constant time) and that its
// timestamp, in unix seconds, is within tolerance of now.
func Verify(secret []byte, timestamp, signature string, body []byte, now time.Time, tolerance time.Duration) error {
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q is not unix seconds", ErrStaleTimestamp, timestamp)
	}
	skew := now.Sub(time.Unix(sec, 0))
	if skew > tolerance || skew < -tolerance {
		return fmt.Errorf("%w: %s off", ErrStaleTimestamp, skew.Round(time.Second))
	}
	return checkSignature(secret, timestamp, signature, body)
}

// checkSignature compares signature with the body's, in constant time.
func checkSignature(secret []byte, timestamp, signature string, body []byte) error {
	got, err := hex.DecodeString(signature)
	if err != nil || len(secret) == 0 {
		return ErrBadSignature
	}
	want, _ := hex.DecodeString(Sign(secret, timestamp, body))
	if !hmac.Equal(got, want) {
		return ErrBadSignature
	}
	return nil
}
