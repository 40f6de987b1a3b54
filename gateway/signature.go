package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
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
	got, err := hex.DecodeString(signature)
	if err != nil {
		return ErrBadSignature
	}
	want, _ := hex.DecodeString(Sign(secret, timestamp, body))
	if !hmac.Equal(got, want) {
		return ErrBadSignature
	}
	return nil
}
