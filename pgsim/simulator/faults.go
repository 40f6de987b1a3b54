package simulator

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Bounds of every fault duration, in the admin API and the flags alike: a
// duration near the type's limit overflows the uniform draw between min and
// max, and an answer held for hours only pins a connection.
const (
	// MaxAnswerDelay bounds latency.min/max and each endpoint's timeoutDelay:
	// they hold an answer while the client waits.
	MaxAnswerDelay = time.Minute
	// MaxDecisionDelay bounds processing.min/max and callback.delay: they run
	// in the background, after the answer.
	MaxDecisionDelay = 24 * time.Hour
)

// maxHeldAnswer is the longest a legal fault set holds one answer: the
// latency, then a timeout fault's delay.
const maxHeldAnswer = 2 * MaxAnswerDelay

// Duration is a time.Duration that reads and writes JSON as "250ms" (a
// number is taken as milliseconds).
type Duration time.Duration

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "250ms", "2s" or a number of milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	ms, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("duration %s: want a string like \"250ms\" or milliseconds", b)
	}
	*d, err = fromMillis(ms)
	return err
}

// fromMillis converts milliseconds to a Duration. Out of range it saturates
// rather than wraps around, so Validate sees the absurd value and refuses it
// naming the field.
func fromMillis(ms float64) (Duration, error) {
	ns := ms * float64(time.Millisecond)
	switch {
	case math.IsNaN(ns):
		return 0, errors.New("duration NaN: want a number of milliseconds")
	case ns >= math.MaxInt64:
		return Duration(math.MaxInt64), nil
	case ns <= math.MinInt64:
		return Duration(math.MinInt64), nil
	}
	return Duration(ns), nil
}

// Range is a closed interval of durations; a value is drawn uniformly.
type Range struct {
	Min Duration `json:"min"`
	Max Duration `json:"max"`
}

// EndpointFaults are the faults of one gateway endpoint.
type EndpointFaults struct {
	ErrorRate    float64  `json:"errorRate"`    // share of calls answered ErrorStatus before doing anything
	ErrorStatus  int      `json:"errorStatus"`  // the injected status, 500 unless set
	FailNext     int      `json:"failNext"`     // the next n calls fail, deterministically
	TimeoutRate  float64  `json:"timeoutRate"`  // share of calls done but answered only after TimeoutDelay
	TimeoutDelay Duration `json:"timeoutDelay"` // how long a timed-out answer is held
}

// CreateFaults are the create endpoint's faults: an endpoint's, and one
// only a create can have.
type CreateFaults struct {
	EndpointFaults
	// CreatedThen500Rate is the share of creates that create the
	// transaction (it is decided and called back as usual, and a lookup by
	// order id finds it) and then answer 500 with a complete error body:
	// the gateway answered, so nothing is in flight, yet it holds the
	// charge. A 500 alone never proves the gateway did nothing.
	CreatedThen500Rate float64 `json:"createdThen500Rate"`
}

// Processing is how a created transaction is decided.
type Processing struct {
	Min         Duration `json:"min"`
	Max         Duration `json:"max"`
	SuccessRate float64  `json:"successRate"`
}

// CallbackFaults disturb the callbacks.
type CallbackFaults struct {
	DropRate      float64  `json:"dropRate"`
	Delay         Duration `json:"delay"`
	DuplicateRate float64  `json:"duplicateRate"`
}

// Faults is the whole fault configuration (docs/design.md §4).
type Faults struct {
	Down       bool           `json:"down"`
	Latency    Range          `json:"latency"`
	Create     CreateFaults   `json:"create"`
	Lookup     EndpointFaults `json:"lookup"`
	Cancel     EndpointFaults `json:"cancel"`
	Processing Processing     `json:"processing"`
	Callback   CallbackFaults `json:"callback"`
}

// DefaultFaults follow the Loopers pg-simulator: 100–500 ms latency, 40% of
// creates failing, 1–5 s processing with 70% success.
func DefaultFaults() Faults {
	endpoint := EndpointFaults{ErrorStatus: 500, TimeoutDelay: Duration(30 * time.Second)}
	create := CreateFaults{EndpointFaults: endpoint}
	create.ErrorRate = 0.4
	return Faults{
		Latency:    Range{Min: Duration(100 * time.Millisecond), Max: Duration(500 * time.Millisecond)},
		Create:     create,
		Lookup:     endpoint,
		Cancel:     endpoint,
		Processing: Processing{Min: Duration(time.Second), Max: Duration(5 * time.Second), SuccessRate: 0.7},
	}
}

// Validate reports every setting out of its bounds, each by its JSON name
// (create.errorRate), as the admin API takes it.
func (f Faults) Validate() error { return f.validate(func(path string) string { return path }) }

// ValidateFlags is Validate naming each setting by its flag
// (--create-error-rate), as the command line takes it.
func (f Faults) ValidateFlags() error { return f.validate(FlagName) }

// FlagName is the flag of the setting at a JSON path: create.errorRate is
// --create-error-rate; processing.successRate, the one exception, --success-rate.
func FlagName(path string) string {
	if path == "processing.successRate" {
		return "--success-rate"
	}
	var b strings.Builder
	b.WriteString("--")
	prev := rune(0)
	for _, r := range path {
		switch {
		case r == '.':
			r = '-'
		case unicode.IsUpper(r):
			b.WriteByte('-')
			r = unicode.ToLower(r)
		case unicode.IsDigit(r) && unicode.IsLetter(prev):
			b.WriteByte('-')
		}
		b.WriteRune(r)
		prev = r
	}
	return b.String()
}

// validate is Validate with each setting called name(its JSON path).
func (f Faults) validate(name func(path string) string) error {
	var errs []error
	rate := func(path string, v float64) {
		if !(v >= 0 && v <= 1) { // NaN too
			errs = append(errs, fmt.Errorf("%s must be within 0..1, got %v", name(path), v))
		}
	}
	delay := func(path string, d Duration, most time.Duration) {
		if d < 0 || time.Duration(d) > most {
			errs = append(errs, fmt.Errorf("%s must be within 0s..%s, got %s", name(path), most, time.Duration(d)))
		}
	}
	span := func(path string, lo, hi Duration, most time.Duration) {
		delay(path+".min", lo, most)
		delay(path+".max", hi, most)
		if hi < lo {
			errs = append(errs, fmt.Errorf("%s %s is below %s %s", name(path+".max"), time.Duration(hi), name(path+".min"), time.Duration(lo)))
		}
	}
	span("latency", f.Latency.Min, f.Latency.Max, MaxAnswerDelay)
	for _, ep := range []struct {
		name string
		f    EndpointFaults
	}{{"create", f.Create.EndpointFaults}, {"lookup", f.Lookup}, {"cancel", f.Cancel}} {
		ep, e := ep.name, ep.f
		rate(ep+".errorRate", e.ErrorRate)
		rate(ep+".timeoutRate", e.TimeoutRate)
		if e.ErrorStatus < 400 || e.ErrorStatus > 599 {
			errs = append(errs, fmt.Errorf("%s must be an HTTP error status (400..599), got %d", name(ep+".errorStatus"), e.ErrorStatus))
		}
		if e.FailNext < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %d", name(ep+".failNext"), e.FailNext))
		}
		delay(ep+".timeoutDelay", e.TimeoutDelay, MaxAnswerDelay)
	}
	rate("create.createdThen500Rate", f.Create.CreatedThen500Rate)
	span("processing", f.Processing.Min, f.Processing.Max, MaxDecisionDelay)
	rate("processing.successRate", f.Processing.SuccessRate)
	rate("callback.dropRate", f.Callback.DropRate)
	rate("callback.duplicateRate", f.Callback.DuplicateRate)
	delay("callback.delay", f.Callback.Delay, MaxDecisionDelay)
	return errors.Join(errs...)
}
