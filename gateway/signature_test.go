package gateway_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/payguard/payguard/gateway"
)

func TestVerify(t *testing.T) {
	secret := []byte("s3cret")
	now := time.Unix(1_800_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	body := []byte(`{"orderId":"o1"}`)
	sig := gateway.Sign(secret, ts, body)

	require.NoError(t, gateway.Verify(secret, ts, sig, body, now, gateway.DefaultTolerance))
	require.NoError(t, gateway.Verify(secret, ts, sig, body, now.Add(4*time.Minute), gateway.DefaultTolerance))
	assert.ErrorIs(t, gateway.Verify(secret, ts, sig, body, now.Add(6*time.Minute), gateway.DefaultTolerance), gateway.ErrStaleTimestamp)
	assert.ErrorIs(t, gateway.Verify(secret, ts, sig, body, now.Add(-6*time.Minute), gateway.DefaultTolerance), gateway.ErrStaleTimestamp)
	assert.ErrorIs(t, gateway.Verify(secret, "yesterday", sig, body, now, gateway.DefaultTolerance), gateway.ErrStaleTimestamp)
	assert.ErrorIs(t, gateway.Verify([]byte("other"), ts, sig, body, now, gateway.DefaultTolerance), gateway.ErrBadSignature)
	assert.ErrorIs(t, gateway.Verify(secret, ts, sig, []byte(`{"orderId":"o2"}`), now, gateway.DefaultTolerance), gateway.ErrBadSignature)
	assert.ErrorIs(t, gateway.Verify(secret, ts, "zz", body, now, gateway.DefaultTolerance), gateway.ErrBadSignature)
	assert.ErrorIs(t, gateway.Verify(secret, ts, "", body, now, gateway.DefaultTolerance), gateway.ErrBadSignature)
	// The signature covers the timestamp: moving it breaks the signature.
	later := strconv.FormatInt(now.Unix()+1, 10)
	assert.ErrorIs(t, gateway.Verify(secret, later, sig, body, now, gateway.DefaultTolerance), gateway.ErrBadSignature)
}

// Card numbers leave the gateway request only masked: last four digits.
func TestMaskCardNo(t *testing.T) {
	for in, want := range map[string]string{
		"1234-5678-9814-1451": "****1451",
		"1234567898141451":    "****1451",
		"1234-5678-9814-145":  "****4145",
		"1234":                "****",
		"":                    "****",
	} {
		assert.Equal(t, want, gateway.MaskCardNo(in), in)
	}
}
