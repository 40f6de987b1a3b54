package testenv

import (
	"context"
	"encoding/base64"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/payguard/payguard/codec"
)

// The payload codec key ring of this test binary: generated on first use,
// so no test key lives in the repository (the recorded histories' fixed
// key, workflows/testdata/codec-test-keys, is the one exception: it only
// opens those fake orders).
var (
	keysOnce sync.Once
	keyRing  string
	testCdc  *codec.Codec
)

// CodecKeys is the key ring (PAYGUARD_CODEC_KEYS form) every worker,
// starter and client of this test binary shares: the ring in the file
// PAYGUARD_TEST_CODEC_KEY_FILE names when set (`make record-histories`
// records with the replay tests' key), else a fresh key.
func CodecKeys() string {
	keysOnce.Do(func() {
		keyRing = codec.NewKey("test-" + time.Now().UTC().Format("150405"))
		if path := os.Getenv("PAYGUARD_TEST_CODEC_KEY_FILE"); path != "" {
			raw, err := os.ReadFile(path)
			if err != nil {
				panic(err)
			}
			keyRing = string(raw)
		}
		keys, err := codec.ParseKeys(keyRing)
		if err != nil {
			panic(err)
		}
		if testCdc, err = codec.New(keys); err != nil {
			panic(err)
		}
	})
	return keyRing
}

// Codec is the codec of CodecKeys.
func Codec() *codec.Codec {
	CodecKeys()
	return testCdc
}

// RawTemporal is a client of the dev server without the codec: it sees the
// payloads as Temporal stores them, as anyone reading its database would.
func RawTemporal(t testing.TB) client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.DialContext(ctx, client.Options{HostPort: TemporalAddress(t), Namespace: "default",
		Logger: sdklog.NewStructuredLogger(Logger(t))})
	if err != nil {
		t.Fatalf("dial temporal: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// CardInClear returns the first form in which text shows cardNo in clear —
// as is, its last eight characters, the "cardNo" JSON key, or base64 of any
// of them at each alignment inside longer base64 data (history JSON carries
// payload bytes in base64) — or "" when it shows none.
func CardInClear(text, cardNo string) string {
	for _, needle := range []string{cardNo, cardNo[len(cardNo)-9:], `"cardNo"`} {
		if strings.Contains(text, needle) {
			return needle
		}
		for shift := 0; shift < 3; shift++ {
			enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", shift) + needle))
			if inner := enc[4 : len(enc)-4]; strings.Contains(text, inner) {
				return inner
			}
		}
	}
	return ""
}
