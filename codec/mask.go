package codec

import (
	"bytes"
	"encoding/json"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/payguard/payguard/gateway"
)

// cardField is the JSON name every payguard payload gives a card number
// (workflows.PaymentInput, activities.RequestInput, gateway.CreateRequest).
const cardField = "cardNo"

// displayMask is the codec server's last step on decode: in a JSON payload,
// every "cardNo" string becomes gateway.MaskCardNo of it, so the Temporal
// UI shows an order's input with the card's last four digits only, as the
// logs and summaries do. Encoding passes through.
type displayMask struct{}

func (displayMask) Encode(p []*commonpb.Payload) ([]*commonpb.Payload, error) { return p, nil }

// The SDK's handler decodes with its codecs first to last, so with
// (codec, displayMask) the mask sees what the codec decrypted.
func (displayMask) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		out[i] = p
		if string(p.GetMetadata()[MetadataEncoding]) != converter.MetadataEncodingJSON || !bytes.Contains(p.GetData(), []byte(`"`+cardField+`"`)) {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(p.GetData()))
		dec.UseNumber() // amounts stay exact
		var v any
		if dec.Decode(&v) != nil {
			continue
		}
		data, err := json.Marshal(maskCards(v))
		if err != nil {
			continue
		}
		out[i] = &commonpb.Payload{Metadata: p.GetMetadata(), Data: data}
	}
	return out, nil
}

func maskCards(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if s, ok := e.(string); ok && k == cardField {
				t[k] = gateway.MaskCardNo(s)
			} else {
				t[k] = maskCards(e)
			}
		}
	case []any:
		for i, e := range t {
			t[i] = maskCards(e)
		}
	}
	return v
}
