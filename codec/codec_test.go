package codec_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/payguard/payguard/codec"
)

const card = "1234-5678-9814-1451"

type order struct {
	OrderID string `json:"orderId"`
	CardNo  string `json:"cardNo"`
}

func mustCodec(t *testing.T, ring string) *codec.Codec {
	t.Helper()
	keys, err := codec.ParseKeys(ring)
	require.NoError(t, err)
	c, err := codec.New(keys)
	require.NoError(t, err)
	return c
}

func TestEncryptedPayloadsHideTheCardAndDecodeBack(t *testing.T) {
	c := mustCodec(t, codec.NewKey("k1"))
	dc := c.DataConverter()
	p, err := dc.ToPayload(order{OrderID: "o-1", CardNo: card})
	require.NoError(t, err)
	assert.NotContains(t, p.String(), card)
	assert.NotContains(t, string(p.GetData()), "1451", "not even the last digits")
	assert.Equal(t, codec.EncodingEncrypted, string(p.Metadata[codec.MetadataEncoding]))
	assert.Equal(t, "k1", string(p.Metadata[codec.MetadataKeyID]))
	var back order
	require.NoError(t, dc.FromPayload(p, &back))
	assert.Equal(t, order{OrderID: "o-1", CardNo: card}, back)

	again, err := dc.ToPayload(order{OrderID: "o-1", CardNo: card})
	require.NoError(t, err)
	assert.NotEqual(t, p.GetData(), again.GetData(), "a fresh nonce each time")
}

// Rotation: the new key goes first and encrypts; payloads of the old key
// still decode while it stays in the ring, and not after it is dropped.
func TestKeysRotate(t *testing.T) {
	old := codec.NewKey("2026-01")
	before := mustCodec(t, old)
	oldPayload, err := before.DataConverter().ToPayload(order{CardNo: card})
	require.NoError(t, err)

	rotated := mustCodec(t, codec.NewKey("2026-06")+"\n"+old)
	newPayload, err := rotated.DataConverter().ToPayload(order{CardNo: card})
	require.NoError(t, err)
	assert.Equal(t, "2026-06", string(newPayload.Metadata[codec.MetadataKeyID]))
	var got order
	require.NoError(t, rotated.DataConverter().FromPayload(oldPayload, &got))
	assert.Equal(t, card, got.CardNo)

	_, err = before.Decode([]*commonpb.Payload{newPayload})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `key "2026-06", which this process does not have (its keys: 2026-01)`)
}

// A key with the right id but the wrong bytes is an error naming the key,
// never garbage.
func TestWrongKeyIsAClearError(t *testing.T) {
	p, err := mustCodec(t, codec.NewKey("k1")).DataConverter().ToPayload(order{CardNo: card})
	require.NoError(t, err)
	var got order
	err = mustCodec(t, codec.NewKey("k1")).DataConverter().FromPayload(p, &got)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `does not decrypt with key "k1"`)
	assert.Empty(t, got.CardNo)

	p.Data[len(p.Data)-1] ^= 1
	_, err = mustCodec(t, codec.NewKey("k1")).Decode([]*commonpb.Payload{p})
	assert.ErrorContains(t, err, "altered")
}

// Histories written before encryption carry plain JSON payloads: they
// decode unchanged.
func TestPlainPayloadsPassThrough(t *testing.T) {
	plain, err := converter.GetDefaultDataConverter().ToPayload(order{OrderID: "old", CardNo: card})
	require.NoError(t, err)
	var got order
	require.NoError(t, mustCodec(t, codec.NewKey("k1")).DataConverter().FromPayload(plain, &got))
	assert.Equal(t, "old", got.OrderID)
}

func TestParseKeysRefusesBadRings(t *testing.T) {
	for ring, want := range map[string]string{
		"":                                  "empty",
		"# only a comment\n":                "empty",
		"k1":                                "want id:base64-key",
		"k1:short":                          "want 32 bytes",
		"bad id:" + strings.Repeat("A", 44): "want id:base64-key",
		codec.NewKey("k") + "," + codec.NewKey("k"): "listed twice",
	} {
		_, err := codec.ParseKeys(ring)
		if assert.Error(t, err, "%q", ring) {
			assert.Contains(t, err.Error(), want, "%q", ring)
		}
	}
	keys, err := codec.ParseKeys("# ring\n" + codec.NewKey("a") + ", " + codec.NewKey("b") + "\n\n" + codec.NewKey("c") + "\n")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c"}, keys.IDs())
	assert.Equal(t, "a", keys.Current.ID)
}

func TestLoadKeysSaysHowToProvideOne(t *testing.T) {
	_, err := codec.LoadKeys("", filepath.Join(t.TempDir(), "missing"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), codec.KeysEnv)
	assert.Contains(t, err.Error(), "make codec-key")

	path := filepath.Join(t.TempDir(), "dir", "keys")
	created, err := codec.EnsureDevKeyFile(path)
	require.NoError(t, err)
	assert.True(t, created)
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "readable by its owner only")
	fromFile, err := codec.LoadKeys("", path)
	require.NoError(t, err)
	assert.Equal(t, []string{"dev-1"}, fromFile.IDs())
	created, err = codec.EnsureDevKeyFile(path)
	require.NoError(t, err)
	assert.False(t, created, "an existing ring is kept: its payloads must stay readable")

	inline, err := codec.LoadKeys(codec.NewKey("env-1"), path)
	require.NoError(t, err)
	assert.Equal(t, []string{"env-1"}, inline.IDs(), "the environment wins over the file")
}

// The codec server speaks the UI's remote codec protocol: the SDK's own
// remote codec client round-trips through it; a browser page from another
// origin and a request without the token are refused.
func TestCodecServer(t *testing.T) {
	c := mustCodec(t, codec.NewKey("k1"))
	mux := http.NewServeMux()
	c.Register(mux, codec.ServerOptions{Origins: []string{"http://127.0.0.1:8233"}, Token: "t0ken"})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	remote := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{Endpoint: srv.URL + codec.Endpoint,
		ModifyRequest: func(r *http.Request) error { r.Header.Set("Authorization", "Bearer t0ken"); return nil }})
	plain, err := converter.GetDefaultDataConverter().ToPayload(order{CardNo: card})
	require.NoError(t, err)
	encoded, err := remote.Encode([]*commonpb.Payload{plain})
	require.NoError(t, err)
	assert.NotContains(t, encoded[0].String(), card)
	decoded, err := c.Decode(encoded)
	require.NoError(t, err, "what the server encodes, the codec decodes")
	back, err := remote.Decode(encoded)
	require.NoError(t, err)
	assert.JSONEq(t, `{"orderId":"","cardNo":"****1451"}`, string(back[0].GetData()), "decoded for display: the card masked")
	assert.Contains(t, string(decoded[0].GetData()), card, "the key ring itself decodes in full")

	noToken := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{Endpoint: srv.URL + codec.Endpoint})
	_, err = noToken.Decode(encoded)
	assert.ErrorContains(t, err, "bearer token")

	preflight := func(origin string) *http.Response {
		req, _ := http.NewRequest(http.MethodOptions, srv.URL+codec.DecodePath, nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type,x-namespace")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	ok := preflight("http://127.0.0.1:8233")
	assert.Equal(t, http.StatusNoContent, ok.StatusCode)
	assert.Equal(t, "http://127.0.0.1:8233", ok.Header.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, ok.Header.Get("Access-Control-Allow-Headers"), "X-Namespace")
	assert.Equal(t, http.StatusForbidden, preflight("http://evil.example").StatusCode)

	resp, err := http.Post(srv.URL+codec.DecodePath, "application/json", bytes.NewReader([]byte(`{"payloads":[]}`)))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}
