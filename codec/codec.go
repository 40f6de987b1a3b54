package codec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"
)

// Payload metadata of an encrypted payload. The names follow Temporal's
// encryption samples, so tools that know them recognise ours.
const (
	MetadataEncoding = converter.MetadataEncoding
	// EncodingEncrypted marks a payload this codec encrypted.
	EncodingEncrypted = "binary/encrypted"
	// MetadataKeyID names the key that encrypted the payload: decoding picks
	// it from the ring, which is what lets keys rotate.
	MetadataKeyID = "encryption-key-id"
	// MetadataCipher names the cipher, for a reader of raw history.
	MetadataCipher = "encryption-cipher"
	CipherAESGCM   = "AES256-GCM"
)

// Codec is the AES-256-GCM converter.PayloadCodec. It encrypts the whole
// serialized payload (metadata included, so not even the payload's type
// shows) with the ring's current key and the key id as additional data;
// it decodes with whichever key the payload names, and passes through
// payloads it did not encrypt (histories recorded before encryption).
type Codec struct {
	keys  Keys
	aeads map[string]cipher.AEAD
}

var _ converter.PayloadCodec = (*Codec)(nil)

// New builds the codec for a key ring.
func New(keys Keys) (*Codec, error) {
	c := &Codec{keys: keys, aeads: map[string]cipher.AEAD{}}
	for id, secret := range keys.all {
		block, err := aes.NewCipher(secret)
		if err != nil {
			return nil, fmt.Errorf("codec key %q: %w", id, err)
		}
		if c.aeads[id], err = cipher.NewGCM(block); err != nil {
			return nil, fmt.Errorf("codec key %q: %w", id, err)
		}
	}
	if c.aeads[keys.Current.ID] == nil {
		return nil, fmt.Errorf("codec: no current key")
	}
	return c, nil
}

// KeyIDs lists the ring's key ids, the current one first.
func (c *Codec) KeyIDs() []string { return c.keys.IDs() }

// Encode encrypts each payload with the current key.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	id := c.keys.Current.ID
	aead := c.aeads[id]
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("codec: serialize payload: %w", err)
		}
		nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
		_, _ = rand.Read(nonce) // crypto/rand.Read never fails (Go 1.24+)
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{
				MetadataEncoding: []byte(EncodingEncrypted),
				MetadataKeyID:    []byte(id),
				MetadataCipher:   []byte(CipherAESGCM),
			},
			Data: aead.Seal(nonce, nonce, plain, []byte(id)),
		}
	}
	return out, nil
}

// Decode decrypts each payload this codec encrypted, with the key it names;
// any other payload passes through unchanged. A key the ring lacks or a
// payload that does not authenticate is an error naming the key id, never
// garbage.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[MetadataEncoding]) != EncodingEncrypted {
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		aead, ok := c.aeads[id]
		if !ok {
			return nil, fmt.Errorf("codec: payload encrypted with key %q, which this process does not have (its keys: %s): add that key to the ring",
				id, strings.Join(c.keys.ids, ", "))
		}
		data := p.GetData()
		if len(data) < aead.NonceSize() {
			return nil, fmt.Errorf("codec: payload encrypted with key %q is truncated", id)
		}
		plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], []byte(id))
		if err != nil {
			return nil, fmt.Errorf("codec: payload does not decrypt with key %q: the ring's key of that id is not the one it was encrypted with, or the payload was altered", id)
		}
		var decoded commonpb.Payload
		if err := proto.Unmarshal(plain, &decoded); err != nil {
			return nil, fmt.Errorf("codec: decrypted payload (key %q) is not a payload: %w", id, err)
		}
		out[i] = &decoded
	}
	return out, nil
}

// DataConverter is the default data converter behind the codec: what every
// payguard client and worker uses, so inputs, results, signals, queries,
// memos and activity summaries are encrypted.
func (c *Codec) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// FailureConverter also encrypts failure messages and stack traces
// (EncodeCommonAttributes): an error's text reaches the history too.
func (c *Codec) FailureConverter() converter.FailureConverter {
	return temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
		DataConverter: c.DataConverter(), EncodeCommonAttributes: true,
	})
}
